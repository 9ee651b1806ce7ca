// Tests of worker.js, the Node.js worker of assay: each test writes small modules to a temporary
// project directory and runs the worker on them as a child process, in both of the ways assay
// starts it (`node worker.js SPEC` and `node --input-type=commonjs -e SOURCE -- SPEC`).
//
// Run with `node --test npm/assay-eval/test/` (Node's built-in test runner; nothing to install).
"use strict";

const assert = require("assert/strict");
const crypto = require("crypto");
const fs = require("fs");
const os = require("os");
const path = require("path");
const { spawn } = require("child_process");
const { test, before, after } = require("node:test");

const WORKER = path.join(__dirname, "..", "worker.js");
const SOURCE = fs.readFileSync(WORKER, "utf8");

// The two ways of running the worker: its arguments after the script's path, or after `-e`.
const MODES = {
  file: (spec) => [WORKER, spec],
  eval: (spec) => ["--input-type=commonjs", "-e", SOURCE, "--", spec],
};

// The project directory of every test, with the modules below in it.
let project;

const MODULES = {
  // An ES module (.mjs) with an async function, which also prints to stdout in every way.
  "esm.mjs": `
    export async function answer({ question, context, user_state, prompts, files }) {
      console.log("log from the function");
      console.info("info from the function");
      console.dir({ dir: "from the function" });
      process.stdout.write("written to process.stdout\\n");
      await new Promise((resolve) => setTimeout(resolve, 5));
      return "echo: " + question + " | context " + JSON.stringify(context) +
        " | state " + JSON.stringify(user_state) + " | prompts " + Object.keys(prompts).join(",") +
        " | files " + files.length;
    }
    console.log("printed while loading");
    export const notAFunction = 42;
  `,
  // CommonJS (.js with no package.json "type"): module.exports = {answer}.
  "cjs.js": `
    function answer({ question }) { return "cjs: " + question; }
    module.exports = { answer };
  `,
  // CommonJS whose names Node cannot see statically: found through module.exports, with `this`.
  "instance.js": `
    class Bot { constructor() { this.greeting = "hello"; }
      answer({ question }) { return this.greeting + " " + question; } }
    module.exports = (() => new Bot())();
  `,
  // A default export, found without `#`.
  "default.mjs": `export default async ({ question }) => "default: " + question;`,
  // A CommonJS function as module.exports, found without `#` too.
  "cjs-default.js": `module.exports = ({ question }) => "cjs default: " + question;`,
  // Errors: a throw, a rejection, a value that is not an Error, and wrong return values.
  "errors.mjs": `
    export function throws() { throw new TypeError("boom"); }
    export async function rejects() { throw new RangeError("async boom"); }
    export function throwsString() { throw "plain string"; }
    export function number() { return 42; }
    export function nothing() {}
    export function badAnswer() { return { final_answer: 42 }; }
    export function noAnswer() { return { text: "hi" }; }
    export function badContexts() { return { final_answer: "x", contexts: "not a list" }; }
    export function circular() { const o = { name: "t" }; o.self = o;
      return { final_answer: "x", tool_calls: [{ name: "t", arguments: o }] }; }
  `,
  // Object returns: contexts (strings and objects), tool calls, a trace; `answer` as the key.
  "objects.mjs": `
    export function full({ question }) {
      return {
        final_answer: "full: " + question,
        contexts: ["plain text", { entity: "refunds", text: "refund policy" }, { text: "no entity" }],
        tool_calls: [
          { name: "search", arguments: { q: question }, result: "3 hits" },
          { name: "lookup", arguments: "{\\"id\\": 1}", result: { found: true }, is_error: false },
          { name: "fails", is_error: true },
        ],
        trace: [{ agent: "planner", output: "plan" }, { agent: "finalizer", output: "done" }],
      };
    }
    export const viaAnswer = () => ({ answer: "from answer" });
    export const viaReply = () => ({ reply: "from reply" });
    export const big = () => "x".repeat(1000000);
  `,
  // Dry runs must not call the function.
  "never.mjs": `export function answer() { throw new Error("called on a dry run"); }`,
  // Concurrency: how many calls overlap, and replies in completion order.
  "slow.mjs": `
    let running = 0, most = 0;
    export async function answer({ question }) {
      running += 1; most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, Number(question)));
      running -= 1;
      return question + " most=" + most;
    }
  `,
  // A module that keeps the event loop alive: the worker must still end at EOF.
  "timer.mjs": `
    setInterval(() => {}, 1000);
    export const answer = () => "still here";
  `,
  // A function that reads stdin: it finds nothing there, and takes no request away.
  "stdin.mjs": `
    export async function answer() {
      let text = "";
      for await (const chunk of process.stdin) text += chunk;
      return "stdin: " + JSON.stringify(text);
    }
  `,
  // A module that does not load.
  "broken.mjs": `export function answer( { return 1; }`,
  "throws-on-load.mjs": `throw new Error("cannot start: no API key");`,
};

before(() => {
  project = fs.mkdtempSync(path.join(os.tmpdir(), "assay-worker-"));
  for (const [name, text] of Object.entries(MODULES)) {
    fs.writeFileSync(path.join(project, name), text);
  }
});

after(() => {
  fs.rmSync(project, { recursive: true, force: true });
});

/**
 * Runs the worker in `mode` on `spec` in the project directory, writes `lines` (objects are
 * written as JSON) to its stdin and closes it. Resolves to {code, signal, stdout, stderr,
 * replies}: replies are stdout's lines parsed as JSON (a line that is not JSON fails the test).
 */
function runWorker(mode, spec, lines, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, MODES[mode](spec), {
      cwd: project,
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
    child.on("error", reject);
    const timer = setTimeout(() => child.kill("SIGKILL"), 20000);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const replies = stdout
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => {
          try {
            return JSON.parse(line);
          } catch (_) {
            throw new Error(`stdout holds a line that is not JSON: ${line}\nstderr: ${stderr}`);
          }
        });
      resolve({ code, signal, stdout, stderr, replies });
    });
    child.stdin.on("error", () => {}); // The worker may exit before reading everything.
    for (const line of lines) {
      child.stdin.write(typeof line === "string" ? `${line}\n` : `${JSON.stringify(line)}\n`);
    }
    child.stdin.end();
  });
}

/** The reply with `id`. */
function reply(result, id) {
  const found = result.replies.find((r) => r.id === id);
  assert.ok(found, `no reply to ${id}; stdout: ${result.stdout}; stderr: ${result.stderr}`);
  return found;
}

for (const mode of Object.keys(MODES)) {
  test(`${mode}: an ES module's async function answers, and prints go to stderr`, async () => {
    const request = {
      id: 7,
      question: "what is 2+2?",
      prompts: { planner: "plan", finalizer: "finish" },
      files: [{ path: "a.txt", text: "A" }],
      user_state: { plan: "pro" },
      context: [{ entity: "e1", text: "t1" }],
    };
    const r = await runWorker(mode, "./esm.mjs#answer", [request, { id: 8, question: "bare" }]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.replies, [
      {
        id: 7,
        final_answer:
          'echo: what is 2+2? | context [{"entity":"e1","text":"t1"}] | state {"plan":"pro"} | ' +
          "prompts planner,finalizer | files 1",
      },
      // context, user_state, prompts and files default to [], {}, {} and [].
      { id: 8, final_answer: "echo: bare | context [] | state {} | prompts  | files 0" },
    ]);
    for (const printed of [
      "printed while loading",
      "log from the function",
      "info from the function",
      "from the function",
      "written to process.stdout",
    ]) {
      assert.ok(r.stderr.includes(printed), `stderr lacks ${printed}: ${r.stderr}`);
      assert.ok(!r.stdout.includes(printed), `stdout has ${printed}`);
    }
  });

  test(`${mode}: CommonJS module.exports = {answer}`, async () => {
    const r = await runWorker(mode, "./cjs.js#answer", [{ id: 1, question: "hi" }]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.replies, [{ id: 1, final_answer: "cjs: hi" }]);
  });

  test(`${mode}: a default export, without #`, async () => {
    const r = await runWorker(mode, "./default.mjs", [{ id: 1, question: "hi" }]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.replies, [{ id: 1, final_answer: "default: hi" }]);
  });

  test(`${mode}: a thrown error is an error reply, and the worker goes on`, async () => {
    const r = await runWorker(mode, "./errors.mjs#throws", [{ id: 1 }, { id: 2 }]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.replies.map((x) => Object.keys(x)), [["id", "error"], ["id", "error"]]);
    for (const id of [1, 2]) assert.match(reply(r, id).error, /^TypeError: boom\n\s+at throws /);
  });

  test(`${mode}: a dry run hashes the prompts without calling the function`, async () => {
    const prompts = { planner: "assay-dry-run:planner:1", expert: "ünïcödé ✓ prompt" };
    const r = await runWorker(mode, "./never.mjs#answer", [
      { id: 3, dry_run: true, prompts, question: "", files: [] },
    ]);
    assert.equal(r.code, 0, r.stderr);
    const sha = (text) => crypto.createHash("sha256").update(text, "utf8").digest("hex");
    assert.deepEqual(r.replies, [
      { id: 3, prompt_sha256: { planner: sha(prompts.planner), expert: sha(prompts.expert) } },
    ]);
  });

  test(`${mode}: a missing export is exit 2 naming the spec and the exports`, async () => {
    const r = await runWorker(mode, "./esm.mjs#nope", [{ id: 1, question: "a" }]);
    assert.equal(r.code, 2);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /`\.\/esm\.mjs#nope`/);
    assert.match(r.stderr, /`answer` \(function\)/);
    assert.match(r.stderr, /`notAFunction` \(number\)/);
  });

  test(`${mode}: a malformed line is exit 2`, async () => {
    const r = await runWorker(mode, "./cjs.js#answer", ["this is not json"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /not JSON/);
  });
}

test("CommonJS names Node cannot see are found on module.exports, called with it as this", async () => {
  const r = await runWorker("file", "./instance.js#answer", [{ id: 1, question: "there" }]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(r.replies, [{ id: 1, final_answer: "hello there" }]);
});

test("a CommonJS function as module.exports is the default", async () => {
  for (const spec of ["./cjs-default.js", "./cjs-default.js#default"]) {
    const r = await runWorker("file", spec, [{ id: 1, question: "hi" }]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.replies, [{ id: 1, final_answer: "cjs default: hi" }]);
  }
});

test("members every function has (call, toString) are not exports", async () => {
  const r = await runWorker("file", "./cjs-default.js#call", []);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /has no export `call`/);
});

test("an export that is not a function is exit 2", async () => {
  const r = await runWorker("file", "./esm.mjs#notAFunction", []);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /exports `notAFunction` as number, not a function/);
});

test("rejections, thrown non-errors and wrong return values are error replies", async () => {
  const cases = {
    rejects: /^RangeError: async boom\n\s+at rejects /,
    throwsString: /threw a value that is not an Error: 'plain string'/,
    number: /returned number \(42\); expected a string .* or an object with `final_answer`/,
    nothing: /returned undefined/,
    badAnswer: /`final_answer` as number \(42\); it must be a string/,
    noAnswer: /object without `final_answer` \(keys: text\)/,
    badContexts: /`contexts` must be an array, got string/,
    circular: /cannot be written as JSON/,
  };
  for (const [name, pattern] of Object.entries(cases)) {
    const r = await runWorker("file", `./errors.mjs#${name}`, [{ id: 5, question: "q" }]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(Object.keys(reply(r, 5)), ["id", "error"], name);
    assert.match(reply(r, 5).error, pattern, name);
  }
});

test("an object return keeps contexts, tool calls and the trace", async () => {
  const r = await runWorker("file", "./objects.mjs#full", [{ id: 2, question: "refund?" }]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(r.replies, [
    {
      id: 2,
      final_answer: "full: refund?",
      contexts: [
        { text: "plain text" },
        { entity: "refunds", text: "refund policy" },
        { text: "no entity" },
      ],
      tool_calls: [
        { name: "search", arguments: { q: "refund?" }, result: "3 hits" },
        { name: "lookup", arguments: '{"id": 1}', result: '{"found":true}', is_error: false },
        { name: "fails", is_error: true },
      ],
      trace: [
        { agent: "planner", output: "plan" },
        { agent: "finalizer", output: "done" },
      ],
    },
  ]);
  for (const [name, text] of [["viaAnswer", "from answer"], ["viaReply", "from reply"]]) {
    const other = await runWorker("file", `./objects.mjs#${name}`, [{ id: 1 }]);
    assert.deepEqual(other.replies, [{ id: 1, final_answer: text }]);
  }
});

test("a reply larger than a pipe's buffer arrives whole", async () => {
  const r = await runWorker("eval", "./objects.mjs#big", [{ id: 1 }, { id: 2 }]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(r.replies.map((x) => [x.id, x.final_answer.length]), [[1, 1000000], [2, 1000000]]);
});

test("one request at a time by default, in order", async () => {
  const requests = [80, 10, 40].map((ms, i) => ({ id: i + 1, question: String(ms) }));
  const r = await runWorker("file", "./slow.mjs#answer", requests);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(
    r.replies.map((x) => [x.id, x.final_answer]),
    [[1, "80 most=1"], [2, "10 most=1"], [3, "40 most=1"]],
  );
});

test("ASSAY_WORKER_CONCURRENCY=N keeps up to N in flight; replies carry the id", async () => {
  const requests = [600, 20, 150, 20, 20].map((ms, i) => ({ id: i + 1, question: String(ms) }));
  const r = await runWorker("file", "./slow.mjs#answer", requests, {
    ASSAY_WORKER_CONCURRENCY: "2",
  });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.replies.length, 5);
  // The slow first request finishes last; never more than two ran at once.
  assert.equal(r.replies[4].id, 1);
  for (const x of r.replies) assert.match(x.final_answer, /most=[12]$/);
  assert.match(reply(r, 5).final_answer, /most=2$/);
});

test("the function sees an empty stdin, and every request is answered", async () => {
  const r = await runWorker("eval", "./stdin.mjs#answer", [{ id: 1 }, { id: 2 }, { id: 3 }]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(r.replies, [1, 2, 3].map((id) => ({ id, final_answer: 'stdin: ""' })));
});

test("a bad ASSAY_WORKER_CONCURRENCY is exit 2", async () => {
  const r = await runWorker("file", "./cjs.js#answer", [], { ASSAY_WORKER_CONCURRENCY: "0" });
  assert.equal(r.code, 2);
  assert.match(r.stderr, /ASSAY_WORKER_CONCURRENCY/);
});

test("EOF ends the worker even when the module keeps timers open", async () => {
  const r = await runWorker("file", "./timer.mjs#answer", [{ id: 1 }]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(r.replies, [{ id: 1, final_answer: "still here" }]);
});

test("a request without an integer id is exit 2", async () => {
  for (const line of ['{"question": "no id"}', '{"id": "7"}', '{"id": 1.5}', "[1]"]) {
    const r = await runWorker("file", "./cjs.js#answer", [line]);
    assert.equal(r.code, 2, line);
    assert.match(r.stderr, /integer `id`|not a JSON object/, line);
  }
});

test("a module that does not load is exit 2 with its error's stack", async () => {
  let r = await runWorker("eval", "./broken.mjs#answer", []);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /cannot load .*broken\.mjs/);
  assert.match(r.stderr, /SyntaxError/);
  r = await runWorker("file", "./throws-on-load.mjs#answer", []);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /Error: cannot start: no API key\n\s+at /);
  r = await runWorker("file", "./missing.mjs#answer", []);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /cannot load .*missing\.mjs/);
});

test("no SPEC, or more than one, is a usage error", async () => {
  const prefix = { file: [WORKER], eval: ["--input-type=commonjs", "-e", SOURCE, "--"] };
  for (const mode of Object.keys(MODES)) {
    for (const extra of [[], ["./cjs.js#answer", "more"]]) {
      const child = await new Promise((resolve) => {
        const p = spawn(process.execPath, [...prefix[mode], ...extra], {
          cwd: project,
          stdio: ["ignore", "pipe", "pipe"],
        });
        let stderr = "";
        p.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
        p.on("close", (code) => resolve({ code, stderr }));
      });
      assert.equal(child.code, 2, `${mode} ${extra}`);
      assert.match(child.stderr, /usage: /, `${mode} ${extra}`);
    }
  }
});

test("SIGINT ends the worker quietly", async () => {
  const child = spawn(process.execPath, [WORKER, "./slow.mjs#answer"], {
    cwd: project,
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d) => (stderr += d));
  child.stdout.setEncoding("utf8");
  child.stdin.write('{"id": 1, "question": "10"}\n');
  // Once the first reply is out, the worker is loaded and waiting for more.
  await new Promise((resolve) => child.stdout.once("data", resolve));
  child.kill("SIGINT");
  const code = await new Promise((resolve) => child.on("close", (c) => resolve(c)));
  assert.equal(code, 130);
  assert.equal(stderr, "");
});

test("the worker is one self-contained CommonJS script", () => {
  // No require of anything but Node's built-ins, and no #! line (node -e rejects one).
  const required = [...SOURCE.matchAll(/require\(["']([^"']+)["']\)/g)].map((m) => m[1]);
  const builtins = new Set(require("module").builtinModules);
  for (const name of required) assert.ok(builtins.has(name.replace(/^node:/, "")), name);
  assert.ok(!SOURCE.startsWith("#!"));
  // Required by another module, it runs nothing and exports nothing.
  assert.deepEqual(require(WORKER), {});
});
