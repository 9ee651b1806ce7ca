// The Node.js worker of assay: makes a JavaScript function the product under test
// (`target = "node:./src/bot.js#answer"`). assay starts it once, in the project directory, as
//
//   node worker.js SPEC
//   node --input-type=commonjs -e "<this file's source>" -- SPEC   (the `--` may be left out)
//
// where SPEC is `<module path>#<export name>` (the name `default` when there is no `#`), and
// then talks to it in JSON lines: one request a line on stdin, one reply a line on stdout,
// each carrying the request's id. The protocol is the same as the Python worker's; it is
// described in docs/node-worker.md.
//
// assay embeds this file's source and may run it with `-e`, so it must stay one self-contained
// CommonJS script that needs nothing but Node's built-in modules: no require of sibling files,
// and no `#!` line (`node -e` cannot parse one).
"use strict";

const crypto = require("crypto");
const fs = require("fs");
const path = require("path");
const stream = require("stream");
const url = require("url");
const util = require("util");

// Exit code for bad usage, a module or function that cannot be found, and a malformed
// request: assay's "bad input".
const BAD_INPUT = 2;

// What a function is expected to return, for error messages.
const EXPECTED =
  "a string (the final answer) or an object with `final_answer` (a string) and, optionally, " +
  "`contexts`, `tool_calls` and `trace`";

/** Writes all of `text` to file descriptor `fd`, waiting while a full pipe cannot take it. */
function writeAll(fd, text) {
  const buffer = Buffer.from(text, "utf8");
  let written = 0;
  while (written < buffer.length) {
    try {
      written += fs.writeSync(fd, buffer, written, buffer.length - written);
    } catch (e) {
      if (e.code !== "EAGAIN") throw e;
      // A non-blocking pipe that is full: give the reader a moment.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
}

/** Prints an error on stderr and ends the worker with `code`. */
function fail(message, code = BAD_INPUT) {
  try {
    writeAll(2, `assay worker: ${message}\n`);
  } catch (_) {
    // Nobody is listening on stderr: the exit code is all there is to say.
  }
  process.exit(code);
}

/** The SPEC argument, or a usage error: the arguments are `[--] SPEC`. */
function specArgument(args) {
  const rest = args[0] === "--" ? args.slice(1) : args;
  if (rest.length !== 1 || rest[0] === "") {
    fail(
      "usage: node worker.js <module path>#<export name> (or node -e SOURCE -- SPEC); " +
        `got ${rest.length === 0 ? "no argument" : JSON.stringify(rest)}`,
    );
  }
  return rest[0];
}

/** `{modulePath, name}` from `<module path>#<export name>`; the name is `default` without `#`. */
function parseSpec(spec) {
  // Module paths may hold a `#` (rarely); export names never do, so split at the last one.
  const hash = spec.lastIndexOf("#");
  if (hash < 0) return { modulePath: spec, name: "default" };
  return { modulePath: spec.slice(0, hash), name: spec.slice(hash + 1) || "default" };
}

/**
 * Takes stdin and stdout for the protocol and returns stdin's stream. Everything the user's
 * code writes to stdout (console.log, console.info, console.debug, console.dir, console.table,
 * process.stdout.write) goes to stderr instead, since a stray line on stdout would be read as a
 * reply; protocol lines go to fd 1 directly. The user's code sees an empty, ended stdin.
 */
function takeStdio() {
  const input = process.stdin;
  const descriptor = Object.getOwnPropertyDescriptor(process, "stdout");
  if (descriptor && descriptor.configurable) {
    // process.stdout now is process.stderr. The real stdout stream is never made, so fd 1 is
    // left as it came (blocking) for writeAll.
    Object.defineProperty(process, "stdout", {
      configurable: true,
      enumerable: descriptor.enumerable,
      get: () => process.stderr,
    });
  } else {
    process.stdout.write = process.stderr.write.bind(process.stderr);
  }
  // The global console may already hold the stdout stream: give it stderr's methods.
  const toStderr = new console.Console({ stdout: process.stderr, stderr: process.stderr });
  const methods = [
    "log", "info", "debug", "warn", "error", "dir", "dirxml", "table", "trace", "group",
    "groupCollapsed", "groupEnd", "time", "timeEnd", "timeLog", "count", "countReset", "assert",
  ];
  for (const method of methods) {
    if (typeof toStderr[method] === "function") console[method] = toStderr[method];
  }
  const stdinDescriptor = Object.getOwnPropertyDescriptor(process, "stdin");
  if (stdinDescriptor && stdinDescriptor.configurable) {
    const empty = stream.Readable.from([]);
    Object.defineProperty(process, "stdin", {
      configurable: true,
      enumerable: stdinDescriptor.enumerable,
      get: () => empty,
    });
  }
  return input;
}

/**
 * `name` as a member of `holder` (its own, or its class's), leaving out what every object or
 * function has (`toString`, `call`, …); undefined when there is none.
 */
function member(holder, name) {
  if (holder === null || (typeof holder !== "object" && typeof holder !== "function")) {
    return undefined;
  }
  for (let o = holder; o && o !== Object.prototype && o !== Function.prototype; ) {
    if (Object.prototype.hasOwnProperty.call(o, name)) return holder[name];
    o = Object.getPrototypeOf(o);
  }
  return undefined;
}

/** "`name` (function), `other` (string)" for the enumerable members of `holder`. */
function describeMembers(holder) {
  let names = [];
  try {
    names = Object.keys(holder);
  } catch (_) {
    // A module still being loaded (a cycle): nothing to list.
  }
  return names
    .map((key) => {
      let kind;
      try {
        kind = holder[key] === null ? "null" : typeof holder[key];
      } catch (_) {
        kind = "not loaded";
      }
      return `\`${key}\` (${kind})`;
    })
    .join(", ");
}

/**
 * Loads the module of `spec` and returns `{fn, self}`: the function and the `this` to call it
 * with. Ends the worker (exit 2) when the module does not load or has no such function.
 */
async function loadFunction(spec) {
  const { modulePath, name } = parseSpec(spec);
  if (modulePath === "") fail(`\`${spec}\`: no module path before \`#\``);
  const file = path.resolve(process.cwd(), modulePath);

  // import() of a file URL loads ES modules (.mjs, or .js under "type": "module") and CommonJS
  // alike; a CommonJS module's module.exports is then the namespace's `default`.
  let mod;
  try {
    mod = await import(url.pathToFileURL(file).href);
  } catch (e) {
    const detail = e && e.stack ? e.stack : String(e);
    fail(`\`${spec}\`: cannot load ${file}:\n${detail}`);
  }

  // The export itself (ESM, or a CommonJS name Node could see), then a member of the default
  // export (a CommonJS module.exports object, or `export default {answer}`), called with that
  // object as `this` so that methods of a class instance work too.
  let fn = member(mod, name);
  let self;
  if (typeof fn !== "function") {
    const fromDefault = member(mod.default, name);
    if (fromDefault !== undefined) {
      fn = fromDefault;
      self = mod.default;
    }
  }
  if (typeof fn === "function") return { fn, self };

  const found =
    fn === undefined
      ? `has no export \`${name}\``
      : `exports \`${name}\` as ${fn === null ? "null" : typeof fn}, not a function`;
  let listed = `its exports: ${describeMembers(mod) || "none"}`;
  const inner = mod.default;
  if (inner !== null && typeof inner === "object" && describeMembers(inner)) {
    listed += `; members of its default export: ${describeMembers(inner)}`;
  }
  fail(`\`${spec}\`: ${file} ${found}; ${listed}`);
}

/** The text of a thrown value: "Name: message" and the stack. */
function errorText(e) {
  if (e instanceof Error || (e && typeof e === "object" && "message" in e)) {
    const head = `${e.name || "Error"}: ${e.message}`;
    const stack = typeof e.stack === "string" ? e.stack : "";
    let text = stack.startsWith(head) ? stack : stack ? `${head}\n${stack}` : head;
    if (e.cause !== undefined) text += `\nCaused by: ${errorText(e.cause)}`;
    return text;
  }
  return `the function threw a value that is not an Error: ${util.inspect(e)}`;
}

/** A short description of a value for error messages: its type and its start. */
function shown(value) {
  const type = value === null ? "null" : Array.isArray(value) ? "an array" : typeof value;
  let text = util.inspect(value, { depth: 1, breakLength: Infinity });
  if (text.length > 200) text = `${text.slice(0, 200)}…`;
  return `${type} (${text})`;
}

/** A reply's contexts: strings become `{text}`; an error message when they are not valid. */
function normaliseContexts(contexts) {
  if (!Array.isArray(contexts)) {
    return { error: `\`contexts\` must be an array, got ${shown(contexts)}` };
  }
  const out = [];
  for (const [i, c] of contexts.entries()) {
    if (typeof c === "string") {
      out.push({ text: c });
    } else if (c && typeof c === "object" && typeof c.text === "string") {
      if (c.entity !== undefined && c.entity !== null && typeof c.entity !== "string") {
        return { error: `\`contexts[${i}].entity\` must be a string, got ${shown(c.entity)}` };
      }
      out.push(c.entity === undefined || c.entity === null ? { text: c.text } : { entity: c.entity, text: c.text });
    } else {
      return {
        error: `\`contexts[${i}]\` must be a string or {entity?, text}, got ${shown(c)}`,
      };
    }
  }
  return { value: out };
}

/** A reply's tool calls; a `result` that is not a string is written as JSON text. */
function normaliseToolCalls(calls) {
  if (!Array.isArray(calls)) {
    return { error: `\`tool_calls\` must be an array, got ${shown(calls)}` };
  }
  const out = [];
  for (const [i, call] of calls.entries()) {
    if (!call || typeof call !== "object" || typeof call.name !== "string") {
      return {
        error:
          `\`tool_calls[${i}]\` must be {name, arguments?, result?, is_error?} with a string ` +
          `name, got ${shown(call)}`,
      };
    }
    const one = { name: call.name };
    if (call.arguments !== undefined && call.arguments !== null) one.arguments = call.arguments;
    if (call.result !== undefined && call.result !== null) {
      one.result = typeof call.result === "string" ? call.result : JSON.stringify(call.result);
    }
    if (call.is_error !== undefined && call.is_error !== null) one.is_error = Boolean(call.is_error);
    out.push(one);
  }
  return { value: out };
}

/** The reply fields for what the function returned, or `{error}` when it is not an answer. */
function replyFields(result) {
  if (typeof result === "string") return { final_answer: result };
  if (result === null || typeof result !== "object" || Array.isArray(result)) {
    return { error: `the function returned ${shown(result)}; expected ${EXPECTED}` };
  }
  const key = ["final_answer", "answer", "reply"].find((k) => result[k] !== undefined);
  if (key === undefined) {
    return {
      error:
        `the function returned an object without \`final_answer\` (keys: ` +
        `${Object.keys(result).join(", ") || "none"}); expected ${EXPECTED}`,
    };
  }
  if (typeof result[key] !== "string") {
    return {
      error: `the function returned \`${key}\` as ${shown(result[key])}; it must be a string`,
    };
  }
  const fields = { final_answer: result[key] };
  if (result.contexts !== undefined && result.contexts !== null) {
    const contexts = normaliseContexts(result.contexts);
    if (contexts.error) return { error: contexts.error };
    fields.contexts = contexts.value;
  }
  if (result.tool_calls !== undefined && result.tool_calls !== null) {
    const calls = normaliseToolCalls(result.tool_calls);
    if (calls.error) return { error: calls.error };
    fields.tool_calls = calls.value;
  }
  if (result.trace !== undefined && result.trace !== null) {
    if (!Array.isArray(result.trace)) {
      return { error: `\`trace\` must be an array of {agent, output}, got ${shown(result.trace)}` };
    }
    fields.trace = result.trace;
  }
  return fields;
}

/** `{agent: hex sha256 of its prompt (UTF-8)}`, or `{error}` for a prompt that is not text. */
function promptHashes(prompts) {
  const hashes = {};
  for (const [agent, text] of Object.entries(prompts || {})) {
    if (typeof text !== "string") {
      return { error: `the prompt of \`${agent}\` is ${shown(text)}, not a string` };
    }
    hashes[agent] = crypto.createHash("sha256").update(text, "utf8").digest("hex");
  }
  return { hashes };
}

/** The reply to one request: a dry run is answered here, anything else by the function. */
async function handle(request, target) {
  const { id } = request;
  if (request.dry_run === true) {
    const { hashes, error } = promptHashes(request.prompts);
    return error ? { id, error } : { id, prompt_sha256: hashes };
  }
  // JavaScript has no keyword arguments: the function gets one object.
  const argument = {
    question: request.question === undefined ? "" : request.question,
    context: request.context === undefined || request.context === null ? [] : request.context,
    user_state:
      request.user_state === undefined || request.user_state === null ? {} : request.user_state,
    prompts: request.prompts === undefined || request.prompts === null ? {} : request.prompts,
    files: request.files === undefined || request.files === null ? [] : request.files,
  };
  let result;
  try {
    result = await target.fn.call(target.self, argument);
  } catch (e) {
    return { id, error: errorText(e) };
  }
  return { id, ...replyFields(result) };
}

/** Writes one reply line on fd 1; a reply that JSON cannot hold becomes an error reply. */
function send(reply) {
  let line;
  try {
    line = JSON.stringify(reply);
  } catch (e) {
    line = JSON.stringify({
      id: reply.id,
      error: `the function's answer cannot be written as JSON: ${errorText(e)}`,
    });
  }
  try {
    writeAll(1, `${line}\n`);
  } catch (e) {
    // assay stopped reading (EPIPE): nobody is left to answer.
    if (e.code === "EPIPE") process.exit(0);
    throw e;
  }
}

/** N of ASSAY_WORKER_CONCURRENCY: how many requests may be in flight (1 by default). */
function concurrency() {
  const raw = process.env.ASSAY_WORKER_CONCURRENCY;
  if (raw === undefined || raw.trim() === "") return 1;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) {
    fail(`ASSAY_WORKER_CONCURRENCY must be a whole number of at least 1, got ${JSON.stringify(raw)}`);
  }
  return n;
}

/** A request from one line of stdin; a line that is not one ends the worker (exit 2). */
function parseRequest(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (e) {
    fail(`a request line is not JSON (${e.message}): ${shortLine(line)}`);
  }
  if (request === null || typeof request !== "object" || Array.isArray(request)) {
    fail(`a request line is not a JSON object: ${shortLine(line)}`);
  }
  if (!Number.isInteger(request.id)) {
    fail(`a request has no integer \`id\`: ${shortLine(line)}`);
  }
  return request;
}

function shortLine(line) {
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

async function main(args) {
  const spec = specArgument(args);
  const limit = concurrency();
  // Before the user's module runs: whatever it prints at load time goes to stderr too.
  const input = takeStdio();
  process.on("SIGINT", () => process.exit(130));

  const target = await loadFunction(spec);

  // Requests read but not started, and how many are running. With a limit of 1 they run one
  // at a time, in order; above it, up to `limit` interleave and replies come as they finish.
  const waiting = [];
  let running = 0;
  let ended = false;

  function pump() {
    while (running < limit && waiting.length > 0) {
      const request = waiting.shift();
      running += 1;
      handle(request, target)
        .catch((e) => ({ id: request.id, error: errorText(e) }))
        .then((reply) => {
          send(reply);
          running -= 1;
          pump();
        });
    }
    if (ended && running === 0 && waiting.length === 0) {
      // Every reply is written (synchronously): end now, even where the user's code keeps
      // timers or connections open.
      process.exit(0);
    }
  }

  // Every line read is queued at once (a malformed one ends the worker there); `pump` starts
  // as many as the limit allows.
  let pending = "";
  input.setEncoding("utf8");
  input.on("data", (chunk) => {
    pending += chunk;
    let newline;
    while ((newline = pending.indexOf("\n")) >= 0) {
      const line = pending.slice(0, newline).replace(/\r$/, "");
      pending = pending.slice(newline + 1);
      if (line.trim() !== "") waiting.push(parseRequest(line));
    }
    pump();
  });
  const finish = () => {
    if (ended) return;
    if (pending.trim() !== "") waiting.push(parseRequest(pending));
    pending = "";
    ended = true;
    pump();
  };
  input.on("end", finish);
  input.on("error", finish);
}

// Run as a script (`node worker.js SPEC`: the arguments follow the script's path) or as the
// source of `node -e` (`[eval]`: the arguments follow node itself). Required by another
// module, it does nothing and exports nothing.
if (require.main === module) {
  main(process.argv.slice(2)).catch((e) => fail(errorText(e)));
} else if (__filename === "[eval]") {
  main(process.argv.slice(1)).catch((e) => fail(errorText(e)));
}
