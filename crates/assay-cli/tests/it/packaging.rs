//! Installing assay without a Rust toolchain (issue 30, docs/install.md): `scripts/package
//! --profile dev` builds the wheel (maturin) and the npm tarballs from this build's binary, once
//! per test process; the tests install them as a user would, with a PATH that has no cargo or
//! rustc and an environment with nothing else in it, and run the installed `assay`.
//!
//! maturin comes from the test virtualenv (`ASSAY_TEST_PYTHON_VENV`, default `target/test-venv`,
//! made by `scripts/ci-setup`), Node.js and npm from the system. Without them these tests fail
//! with that instruction, unless `ASSAY_SKIP_PYTHON_TESTS=1` (maturin) or `ASSAY_SKIP_NPM_TESTS`
//! (Node.js, npm) says to skip them.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::support::{Scratch, repo_path};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What `scripts/package` built.
struct Packages {
    wheel: PathBuf,
    npm_main: PathBuf,
    npm_platform: PathBuf,
    /// The lock on the output folder, held while this process's tests use its files.
    _lock: std::fs::File,
}

fn venv() -> PathBuf {
    crate::support::test_venv()
}

/// `true` when node and npm run.
fn has_node() -> bool {
    ["node", "npm"].iter().all(|tool| {
        Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The packages, or `None` when a missing tool is to be skipped.
fn packages() -> Option<&'static Packages> {
    let maturin = venv().join("bin/maturin");
    if !maturin.is_file() {
        if std::env::var("ASSAY_SKIP_PYTHON_TESTS").as_deref() == Ok("1") {
            eprintln!("skipped: no maturin at {}", maturin.display());
            return None;
        }
        panic!(
            "maturin is missing at {}: run scripts/ci-setup (or set ASSAY_TEST_PYTHON_VENV)",
            maturin.display()
        );
    }
    if !has_node() {
        if std::env::var_os("ASSAY_SKIP_NPM_TESTS").is_some() {
            eprintln!("skipped: no node and npm (ASSAY_SKIP_NPM_TESTS)");
            return None;
        }
        panic!(
            "node and npm are missing: install Node.js and npm (scripts/fetch-mcp-servers.sh does)"
        );
    }
    static PACKAGES: OnceLock<Result<Packages, String>> = OnceLock::new();
    let built = PACKAGES.get_or_init(|| package(&maturin));
    Some(built.as_ref().unwrap_or_else(|e| panic!("{e}")))
}

/// The folder holding the wheel and the tarballs `scripts/package` built, for other tests that
/// install from it (`None` where the packaging tests are skipped).
pub(crate) fn dist() -> Option<&'static Path> {
    packages().and_then(|p| p.wheel.parent())
}

/// Runs `scripts/package --profile dev` into target/tmp/packaging/dist (emptied first), under a
/// lock that another test process waits on.
fn package(maturin: &Path) -> Result<Packages, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("packaging");
    std::fs::create_dir_all(&dir).unwrap();
    let lock = std::fs::File::create(dir.join("lock")).unwrap();
    lock.lock().unwrap();
    let out = dir.join("dist");
    let _ = std::fs::remove_dir_all(&out);
    let started = Instant::now();
    let run = Command::new(repo_path("scripts/package"))
        .args(["--profile", "dev", "--out"])
        .arg(&out)
        .env("MATURIN", maturin)
        .output()
        .unwrap();
    if !run.status.success() {
        return Err(format!(
            "scripts/package --profile dev failed ({}):\n{}",
            run.status,
            String::from_utf8_lossy(&run.stderr)
        ));
    }
    eprintln!(
        "scripts/package --profile dev: {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let files: Vec<PathBuf> = String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect();
    let find = |what: &str, test: &dyn Fn(&str) -> bool| {
        let mut matching = files
            .iter()
            .filter(|f| test(&f.file_name().unwrap().to_string_lossy()));
        match (matching.next(), matching.next()) {
            (Some(f), None) if f.is_file() => Ok(f.clone()),
            _ => Err(format!(
                "scripts/package printed no single {what}: {files:?}"
            )),
        }
    };
    Ok(Packages {
        wheel: find("wheel", &|n| {
            Path::new(n).extension().is_some_and(|e| e == "whl")
        })?,
        npm_main: find("npm package assay-eval", &|n| {
            n == format!("assay-eval-{VERSION}.tgz")
        })?,
        npm_platform: find("npm platform package", &|n| {
            n.starts_with("assay-eval-")
                && n.ends_with(&format!("-{VERSION}.tgz"))
                && n != format!("assay-eval-{VERSION}.tgz")
        })?,
        _lock: lock,
    })
}

/// A command with nothing of this environment: PATH is `dirs` and /usr/bin:/bin (no cargo, no
/// rustc), HOME an empty folder.
fn clean(program: impl AsRef<std::ffi::OsStr>, dirs: &[&Path], home: &Path) -> Command {
    let mut path: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
    path.extend([PathBuf::from("/usr/bin"), PathBuf::from("/bin")]);
    for dir in &path {
        for tool in ["cargo", "rustc", "rustup"] {
            assert!(
                !dir.join(tool).exists(),
                "{} has {tool}: this test shows an install without a Rust toolchain",
                dir.display()
            );
        }
    }
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .env("NO_COLOR", "1");
    command
}

fn run(command: &mut Command) -> (i32, String, String) {
    let out: Output = command.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `run`, which must exit 0; its stdout.
fn ok(command: &mut Command) -> String {
    let (code, stdout, stderr) = run(command);
    assert_eq!(
        code, 0,
        "{command:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    stdout
}

#[test]
fn the_wheel_installs_assay_into_a_virtualenv_without_rust() {
    let Some(packages) = packages() else { return };
    let wheel = packages.wheel.file_name().unwrap().to_str().unwrap();
    // The binary's wheel: any Python 3, this platform, the tag maturin's audit chose.
    assert!(
        wheel.starts_with(&format!("assay_eval-{VERSION}-py3-none-")),
        "{wheel}"
    );
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    assert!(
        regex::Regex::new(r"-py3-none-manylinux_2_\d+_x86_64\.whl$")
            .unwrap()
            .is_match(wheel),
        "{wheel}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let env = tmp.path().join("venv");
    let bin = env.join("bin");
    ok(clean(venv().join("bin/python"), &[], &home)
        .args(["-m", "venv"])
        .arg(&env));
    ok(clean(bin.join("python"), &[&bin], &home)
        .args([
            "-m",
            "pip",
            "install",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--quiet",
        ])
        .arg(&packages.wheel));

    // `assay` is on the virtualenv's PATH.
    let version = ok(clean("assay", &[&bin], &home).arg("--version"));
    assert_eq!(version.trim(), format!("assay {VERSION}"));

    // A whole run of the example project, offline.
    let project = Scratch::example();
    let stdout = ok(clean("assay", &[&bin], &home)
        .arg("run")
        .arg(project.root())
        .current_dir(tmp.path()));
    assert!(
        stdout.contains("(semantic, state, pattern, always)"),
        "{stdout}"
    );
    let results = project.results();
    assert!(
        results.iter().any(|f| f.starts_with("results_")) && results.len() == 3,
        "{results:?}"
    );

    // The package finds the binary it came with, and `python -m assay_eval` runs it.
    let found = ok(clean(bin.join("python"), &[], &home).args([
        "-c",
        "import assay_eval; print(assay_eval.find_assay_bin())",
    ]));
    assert_eq!(Path::new(found.trim()), bin.join("assay"));
    let version = ok(clean(bin.join("python"), &[], &home).args(["-m", "assay_eval", "--version"]));
    assert_eq!(version.trim(), format!("assay {VERSION}"));
    let (code, _, stderr) = run(clean(bin.join("python"), &[], &home).args([
        "-m",
        "assay_eval",
        "run",
        "/nonexistent",
    ]));
    assert_eq!(code, 2, "the binary's exit code comes through: {stderr}");

    // ASSAY_BIN wins, and must name a file.
    let (code, _, stderr) = run(clean(bin.join("python"), &[], &home)
        .args(["-m", "assay_eval", "--version"])
        .env("ASSAY_BIN", tmp.path().join("no-such-assay")));
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("ASSAY_BIN is set to") && stderr.contains("no-such-assay"),
        "{stderr}"
    );
    let found = ok(clean(bin.join("python"), &[], &home)
        .args([
            "-c",
            "import assay_eval; print(assay_eval.find_assay_bin())",
        ])
        .env("ASSAY_BIN", env!("CARGO_BIN_EXE_assay")));
    assert_eq!(found.trim(), env!("CARGO_BIN_EXE_assay"));

    // The pytest plugin's entry point: pytest (the test virtualenv's, appended to this
    // environment's path) loads `assay_eval.pytest_plugin` from the installed wheel.
    let pytest = pytest_site_packages();
    let site = ok(clean(bin.join("python"), &[], &home).args([
        "-c",
        "import sysconfig; print(sysconfig.get_path('purelib'))",
    ]));
    std::fs::write(
        Path::new(site.trim()).join("zz-test-venv.pth"),
        format!("{}\n", pytest.display()),
    )
    .unwrap();
    let help = ok(clean(bin.join("python"), &[], &home)
        .args(["-m", "pytest", "--help"])
        .current_dir(tmp.path()));
    assert!(
        help.contains("--assay=DIR"),
        "pytest did not load the plugin:\n{help}"
    );
    let origin = ok(clean(bin.join("python"), &[], &home).args([
        "-c",
        "import assay_eval.pytest_plugin as p; print(p.__file__)",
    ]));
    assert!(
        Path::new(origin.trim()).starts_with(site.trim()),
        "{origin}"
    );

    // A product written as a Python function (the rag template's, plus a case it fails), run
    // by the installed `assay`: its worker runs in this environment's Python, the one beside
    // the binary. The installed plugin runs the selected cases; `check` and `__version__`
    // come from the installed package.
    let rag = crate::workers::rag_project();
    let (code, stdout, stderr) = run(clean("assay", &[&bin], &home)
        .args(["run", "--json", "--no-save"])
        .arg(rag.root()));
    assert_eq!(code, 0, "HD-5 fails, the gate passes: {stderr}");
    let log: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(crate::workers::failed_ids(&log), ["HD-5"]);
    let (code, stdout, stderr) = run(clean(bin.join("python"), &[&bin], &home)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "HD-1 or HD-2",
        ])
        .current_dir(rag.root()));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("2 passed"), "{stdout}");
    let checked = ok(clean(bin.join("python"), &[], &home).args([
        "-c",
        "import assay_eval; r = assay_eval.check('50p a page', [{'type': 'contains', 'value': '50p'}]); print(r.passed, assay_eval.__version__)",
    ]));
    assert_eq!(checked.trim(), format!("True {VERSION}"));

    // Without the binary, the error names where it looked.
    std::fs::remove_file(bin.join("assay")).unwrap();
    let (code, _, stderr) = run(clean(bin.join("python"), &[], &home)
        .args(["-c", "import assay_eval; assay_eval.find_assay_bin()"]));
    assert_ne!(code, 0);
    assert!(
        stderr.contains("FileNotFoundError")
            && stderr.contains(&bin.display().to_string())
            && stderr.contains("ASSAY_BIN"),
        "{stderr}"
    );
}

/// The test virtualenv's site-packages, where pytest is.
fn pytest_site_packages() -> PathBuf {
    let python = venv().join("bin/python");
    let out = Command::new(&python)
        .args([
            "-c",
            "import pytest, sysconfig; print(sysconfig.get_path('purelib'))",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pytest is missing at {}: run scripts/ci-setup (or set ASSAY_TEST_PYTHON_VENV)",
        python.display()
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// npm, offline, with an empty cache and a registry nobody answers at: only the tarballs count.
fn npm(dir: &Path, home: &Path) -> Command {
    let mut npm = clean("npm", &[], home);
    npm.current_dir(dir)
        .env("npm_config_cache", home.join("npm-cache"))
        .env("npm_config_registry", "http://127.0.0.1:9/")
        .env("npm_config_offline", "true")
        .env("npm_config_audit", "false")
        .env("npm_config_fund", "false")
        .env("npm_config_update_notifier", "false");
    npm
}

/// A clean Node.js project with `tarballs` installed.
fn node_project(root: &Path, tarballs: &[&Path]) -> PathBuf {
    let home = root.join("home");
    let project = root.join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("package.json"),
        r#"{"name": "uses-assay", "version": "1.0.0", "private": true}"#,
    )
    .unwrap();
    ok(npm(&project, &home)
        .args(["install", "--loglevel=error"])
        .args(tarballs));
    project
}

#[test]
fn the_npm_packages_install_offline_and_pass_exit_codes_and_signals_through() {
    let Some(packages) = packages() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = node_project(tmp.path(), &[&packages.npm_main, &packages.npm_platform]);

    // Only this platform's package is installed; the others (unpublished) are skipped.
    let platforms: Vec<String> = std::fs::read_dir(project.join("node_modules/@assay-eval"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(platforms.len(), 1, "{platforms:?}");

    let npx = |args: &[&str]| {
        let mut npx = npm(&project, &home);
        npx.arg("exec").arg("--").arg("assay").args(args);
        run(&mut npx)
    };
    let (code, stdout, stderr) = npx(&["--version"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), format!("assay {VERSION}"));
    let (code, _, stderr) = npx(&["run", "/nonexistent"]);
    assert_eq!(code, 2, "the binary's exit code comes through: {stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");
    let scratch = Scratch::example();
    let (code, stdout, stderr) = npx(&["run", scratch.root().to_str().unwrap(), "--no-save"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("(semantic, state, pattern, always)"),
        "{stdout}"
    );

    // A JavaScript async function as the product, through `npx assay run`: the verdicts of
    // the Python function it mirrors (HD-5 fails, the rest pass).
    let rag = crate::workers::rag_project();
    rag.write(
        "bot.mjs",
        &format!("{}\nexport {{ answer }};\n", crate::workers::BOT_JS),
    );
    rag.edit(
        "assay.toml",
        "target = \"python:helpdesk.bot:answer\"",
        "target = \"node:./bot.mjs#answer\"",
    );
    let (code, stdout, stderr) = npx(&["run", rag.root().to_str().unwrap(), "--json", "--no-save"]);
    assert_eq!(code, 0, "{stderr}");
    let log: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(crate::workers::failed_ids(&log), ["HD-5"]);
    assert_eq!(log["summary"]["total_tests"], 5, "{}", log["summary"]);

    // SIGTERM to the shim reaches `assay serve`, which shuts down and exits 0; so does the shim.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // In a process group of its own, which the guard kills whatever happens (the shim alone
    // gets the SIGTERM).
    struct Group(std::process::Child);
    impl Drop for Group {
        fn drop(&mut self) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.0.id())])
                .env("PATH", "/usr/bin:/bin")
                .stderr(Stdio::null())
                .status();
            let _ = self.0.wait();
        }
    }
    let mut serve = Group(
        clean("node", &[], &home)
            .arg(project.join("node_modules/.bin/assay"))
            .args(["serve", scratch.root().to_str().unwrap(), "--port"])
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let exited = serve.0.try_wait().unwrap();
        assert!(
            Instant::now() < deadline && exited.is_none(),
            "assay serve did not listen on {port}: {exited:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    ok(Command::new("kill")
        .args(["-TERM", &serve.0.id().to_string()])
        .env("PATH", "/usr/bin:/bin"));
    let status = serve.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "assay serve outlived the shim"
    );

    // Without the platform package the shim names the one it needs.
    let bare = tempfile::tempdir().unwrap();
    let project = node_project(bare.path(), &[&packages.npm_main]);
    let mut npx = npm(&project, &bare.path().join("home"));
    let (code, _, stderr) = run(npx.args(["exec", "--", "assay", "--version"]));
    assert_eq!(code, 3, "{stderr}");
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    assert!(
        stderr.contains("@assay-eval/linux-x64-gnu, which is not installed")
            && stderr.contains(&format!("npm install @assay-eval/linux-x64-gnu@{VERSION}")),
        "{stderr}"
    );
    // ASSAY_BIN names the binary to run instead.
    let mut npx = npm(&project, &bare.path().join("home"));
    let version = ok(npx
        .args(["exec", "--", "assay", "--version"])
        .env("ASSAY_BIN", env!("CARGO_BIN_EXE_assay")));
    assert_eq!(version.trim(), format!("assay {VERSION}"));
}

/// Every platform package template is one the shim looks for on its os, cpu and libc, and the
/// main package lists each one as an optional dependency. (No build: node only.)
#[test]
fn the_npm_templates_match_the_shim() {
    if !has_node() {
        if std::env::var_os("ASSAY_SKIP_NPM_TESTS").is_some() {
            eprintln!("skipped: no node and npm (ASSAY_SKIP_NPM_TESTS)");
            return;
        }
        panic!(
            "node and npm are missing: install Node.js and npm (scripts/fetch-mcp-servers.sh does)"
        );
    }
    let check = r#"
const fs = require("fs");
const path = require("path");
const npm = process.argv[1];
const shim = require(path.join(npm, "assay-eval/bin/assay.js"));
const main = JSON.parse(fs.readFileSync(path.join(npm, "assay-eval/package.json"), "utf8"));
const optional = Object.keys(main.optionalDependencies).sort();
const names = [];
for (const dir of fs.readdirSync(path.join(npm, "platforms")).sort()) {
  const pkg = JSON.parse(fs.readFileSync(path.join(npm, "platforms", dir, "package.json"), "utf8"));
  if (pkg.name !== `@assay-eval/${dir}`) throw new Error(`${dir}: named ${pkg.name}`);
  if (pkg.os.length !== 1 || pkg.cpu.length !== 1) throw new Error(`${dir}: one os and one cpu`);
  const libc = pkg.os[0] === "linux" ? (pkg.libc || [])[0] : null;
  if (pkg.os[0] === "linux" && !libc) throw new Error(`${dir}: a Linux package names its libc`);
  const wanted = shim.platformPackage(pkg.os[0], pkg.cpu[0], libc);
  if (wanted !== pkg.name) throw new Error(`${dir}: the shim wants ${wanted} on ${pkg.os} ${pkg.cpu} ${libc}`);
  const exe = pkg.os[0] === "win32" ? "bin/assay.exe" : "bin/assay";
  if (JSON.stringify(pkg.files) !== JSON.stringify([exe])) throw new Error(`${dir}: files must be [${exe}]`);
  names.push(pkg.name);
}
if (JSON.stringify(names.sort()) !== JSON.stringify(optional)) {
  throw new Error(`optionalDependencies ${optional} != templates ${names}`);
}
if (Object.keys(shim.PACKAGES).length !== names.length) throw new Error("the shim lists another package");
console.log(names.join("\n"));
"#;
    let out = Command::new("node")
        .args(["-e", check])
        .arg(repo_path("npm"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = String::from_utf8(out.stdout).unwrap();
    for platform in [
        "linux-x64-gnu",
        "linux-arm64-gnu",
        "darwin-x64",
        "darwin-arm64",
        "win32-x64",
    ] {
        assert!(
            names
                .lines()
                .any(|n| n == format!("@assay-eval/{platform}")),
            "{names}"
        );
    }
}
