#!/usr/bin/env node
// The `assay` command of the assay-eval npm package: runs the native binary that the platform
// package for this machine carries (one of assay-eval's optionalDependencies; npm installs only
// the one whose "os", "cpu" and "libc" fit). Nothing is downloaded at install time.
"use strict";

const path = require("path");
const { spawn } = require("child_process");

// `${os}-${cpu}` (and `-${libc}` on Linux) -> the package that carries the binary.
const PACKAGES = {
  "darwin-arm64": "@assay-eval/darwin-arm64",
  "darwin-x64": "@assay-eval/darwin-x64",
  "linux-arm64-glibc": "@assay-eval/linux-arm64-gnu",
  "linux-arm64-musl": "@assay-eval/linux-arm64-musl",
  "linux-x64-glibc": "@assay-eval/linux-x64-gnu",
  "linux-x64-musl": "@assay-eval/linux-x64-musl",
  "win32-x64": "@assay-eval/win32-x64",
};

// Exit code when no binary runs: assay's "infrastructure kept it from a verdict".
const NO_BINARY = 3;

/** "glibc" or "musl" on Linux (as npm's "libc" field names them), null elsewhere. */
function libc(platform) {
  if (platform !== "linux") return null;
  try {
    if (process.report) {
      process.report.excludeNetwork = true;
      const header = process.report.getReport().header;
      return header.glibcVersionRuntime ? "glibc" : "musl";
    }
  } catch (_) {
    // Fall through: assume glibc, the common case.
  }
  return "glibc";
}

/** The platform package for this os, cpu and libc, or null when there is none. */
function platformPackage(platform, arch, libcName) {
  const key = libcName ? `${platform}-${arch}-${libcName}` : `${platform}-${arch}`;
  return PACKAGES[key] || null;
}

function describe(platform, arch, libcName) {
  return libcName ? `${platform} ${arch} (${libcName})` : `${platform} ${arch}`;
}

/** The binary to run, or an error message. */
function findBinary() {
  const override = process.env.ASSAY_BIN;
  if (override) {
    return { bin: override };
  }
  const { platform, arch } = process;
  const libcName = libc(platform);
  const where = describe(platform, arch, libcName);
  const pkg = platformPackage(platform, arch, libcName);
  if (!pkg) {
    return {
      error:
        `assay-eval has no binary for ${where}; there are packages for ` +
        `${Object.values(PACKAGES).join(", ")}. ` +
        "Install assay with pip (pip install assay-eval) or cargo instead, or set ASSAY_BIN " +
        "to an assay executable.",
    };
  }
  let manifest;
  try {
    manifest = require.resolve(`${pkg}/package.json`);
  } catch (_) {
    const version = require("../package.json").version;
    return {
      error:
        `the assay binary for ${where} comes in the npm package ${pkg}, which is not ` +
        "installed. It is an optional dependency of assay-eval, which npm installs where os " +
        "and cpu match, and leaves out with --omit=optional (--no-optional), with a lockfile " +
        "made without it, or when the registry lacks it. Install it " +
        `(npm install ${pkg}@${version}), or set ASSAY_BIN to an assay executable.`,
    };
  }
  const exe = platform === "win32" ? "assay.exe" : "assay";
  return { bin: path.join(path.dirname(manifest), "bin", exe) };
}

function main() {
  const found = findBinary();
  if (found.error) {
    process.stderr.write(`error: ${found.error}\n`);
    process.exit(NO_BINARY);
  }
  const child = spawn(found.bin, process.argv.slice(2), { stdio: "inherit" });

  // Signals sent to this process (kill, a supervisor, a CI runner's timeout) go on to assay;
  // assay's own exit then decides this one's.
  const forwarded = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"].filter(
    (s) => process.platform !== "win32" || s === "SIGINT",
  );
  const handlers = {};
  for (const signal of forwarded) {
    handlers[signal] = () => {
      try {
        child.kill(signal);
      } catch (_) {
        // Already gone.
      }
    };
    process.on(signal, handlers[signal]);
  }

  child.on("error", (e) => {
    process.stderr.write(`error: cannot run ${found.bin}: ${e.message}\n`);
    process.exit(NO_BINARY);
  });
  child.on("exit", (code, signal) => {
    if (signal) {
      // Die of the same signal, so the caller sees what assay saw.
      for (const s of forwarded) process.removeListener(s, handlers[s]);
      process.kill(process.pid, signal);
      // Where the signal does not end this process, the shell's convention.
      const number = require("os").constants.signals[signal] || 0;
      process.exit(128 + number);
    }
    process.exit(code === null ? NO_BINARY : code);
  });
}

module.exports = { PACKAGES, platformPackage };

if (require.main === module) {
  main();
}
