//! The release workflow (.github/workflows/release.yml, docs/release.md). Always: its shape
//! (a tag push; the four Linux targets cross-built with zig, macOS on both chips, Windows;
//! PyPI by trusted publishing and npm with provenance, after every build). With
//! `ASSAY_RELEASE_BUILD=1`: the Linux job's shell steps, run here in order for each of its
//! four targets, as a runner would (four release builds: about an hour on two cores, so not
//! in `scripts/test`), and what they produce checked: a wheel per target with the right tag,
//! audited by auditwheel, the x86-64 musl binary running here, the glibc one installed into a
//! fresh virtual environment and run, the ARM64 binaries built for ARM64, the npm tarballs.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::repo_path;

fn workflow() -> Value {
    let text = std::fs::read_to_string(repo_path(".github/workflows/release.yml")).unwrap();
    serde_norway::from_str(&text).unwrap()
}

fn runs(job: &Value) -> Vec<String> {
    job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str().map(str::to_owned))
        .collect()
}

const LINUX: [&str; 4] = [
    "x86_64-unknown-linux-gnu",
    "aarch64-unknown-linux-gnu",
    "x86_64-unknown-linux-musl",
    "aarch64-unknown-linux-musl",
];

#[test]
fn the_release_workflow_builds_every_platform_and_publishes_with_provenance() {
    let w = workflow();
    assert_eq!(w["on"]["push"]["tags"][0], "v*");
    let jobs = &w["jobs"];
    let linux: Vec<&str> = jobs["linux"]["strategy"]["matrix"]["target"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(linux, LINUX);
    let steps = runs(&jobs["linux"]);
    assert!(
        steps
            .iter()
            .any(|r| r.contains("scripts/package --target ${{ matrix.target }} --zig")),
        "{steps:?}"
    );
    assert!(steps.iter().any(|r| r.contains("ziglang==")), "{steps:?}");
    assert!(
        steps
            .iter()
            .any(|r| r.starts_with("scripts/release-version"))
    );
    let macos: Vec<&str> = jobs["macos"]["strategy"]["matrix"]["include"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"].as_str().unwrap())
        .collect();
    assert_eq!(macos, ["x86_64-apple-darwin", "aarch64-apple-darwin"]);
    assert!(
        runs(&jobs["windows"])
            .iter()
            .any(|r| r.contains("scripts/package"))
    );
    for publish in ["publish-pypi", "publish-npm"] {
        let job = &jobs[publish];
        assert_eq!(job["permissions"]["id-token"], "write", "{publish}");
        assert_eq!(
            job["needs"],
            serde_json::json!(["linux", "macos", "windows"]),
            "{publish} waits for every build"
        );
    }
    let pypi = jobs["publish-pypi"]["steps"].as_array().unwrap();
    assert!(
        pypi.iter().any(|s| s["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("pypa/gh-action-pypi-publish"))),
        "trusted publishing: {pypi:?}"
    );
    assert!(
        runs(&jobs["publish-npm"])
            .iter()
            .any(|r| r.contains("npm publish --provenance")),
        "npm with provenance"
    );
    // Every platform package the shim knows is built by some job.
    let templates: Vec<String> = std::fs::read_dir(repo_path("npm/platforms"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(templates.len(), 7, "{templates:?}");
}

/// The ELF machine of a binary (62 x86-64, 183 AArch64).
fn elf_machine(path: &Path) -> u16 {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..4], b"\x7fELF", "{}", path.display());
    u16::from_le_bytes([bytes[18], bytes[19]])
}

/// The `assay` binary inside a wheel, extracted to `dir`.
fn binary_of(wheel: &Path, dir: &Path) -> PathBuf {
    let python = crate::support::test_python();
    let out = Command::new(&python)
        .args([
            "-c",
            "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nn = [n for n in z.namelist() if n.endswith('.data/scripts/assay')][0]\nopen(sys.argv[2], 'wb').write(z.read(n))",
        ])
        .arg(wheel)
        .arg(dir.join("assay"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let bin = dir.join("assay");
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn the_linux_jobs_build_the_four_wheels_and_the_npm_packages_here() {
    if std::env::var("ASSAY_RELEASE_BUILD").as_deref() != Ok("1") {
        eprintln!(
            "skipped: ASSAY_RELEASE_BUILD=1 runs the release workflow's Linux jobs (four release builds)"
        );
        return;
    }
    let w = workflow();
    let job = &w["jobs"]["linux"];
    let root = repo_path("");
    // The runner's Python: a virtual environment of its own (setup-python), where the job's
    // `pip install` goes.
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("runner");
    assert!(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap()
            .success()
    );
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for target in LINUX {
        let _ = std::fs::remove_dir_all(root.join("dist").join(target));
        for step in runs(job) {
            let script = step.replace("${{ matrix.target }}", target);
            let started = std::time::Instant::now();
            let out = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &script])
                .current_dir(&root)
                .env("PATH", &path)
                .env("GITHUB_REF_NAME", format!("v{}", env!("CARGO_PKG_VERSION")))
                // A runner has none of this checkout's build settings.
                .env_remove("RUSTC_WORKSPACE_WRAPPER")
                .env_remove("CLIPPY_ARGS")
                .env_remove("CARGO_TARGET_DIR")
                .output()
                .unwrap();
            eprintln!(
                "{target}: `{script}` exited {:?} in {:.0} s",
                out.status.code(),
                started.elapsed().as_secs_f64()
            );
            assert!(
                out.status.success(),
                "{target}: {script}\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // auditwheel checks what the jobs made (the workflow itself relies on maturin's audit).
    let pip = Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("auditwheel==6.8.2")
        .output()
        .unwrap();
    assert!(pip.status.success(), "{pip:?}");
    let version = env!("CARGO_PKG_VERSION");
    // The platform tags each wheel's name must carry (in any order), and its ELF machine.
    let tags: [(&str, &[&str], u16); 4] = [
        (
            "x86_64-unknown-linux-gnu",
            &["manylinux2014_x86_64", "manylinux_2_17_x86_64"],
            62,
        ),
        (
            "aarch64-unknown-linux-gnu",
            &["manylinux2014_aarch64", "manylinux_2_17_aarch64"],
            183,
        ),
        ("x86_64-unknown-linux-musl", &["musllinux_1_2_x86_64"], 62),
        (
            "aarch64-unknown-linux-musl",
            &["musllinux_1_2_aarch64"],
            183,
        ),
    ];
    let prefix = format!("assay_eval-{version}-py3-none-");
    let mut wheels = std::collections::BTreeMap::new();
    for (target, tag, machine) in tags {
        let dist = root.join("dist").join(target);
        let files: Vec<String> = std::fs::read_dir(&dist)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let named: Vec<&String> = files.iter().filter(|f| f.starts_with(&prefix)).collect();
        assert_eq!(named.len(), 1, "{target}: one wheel: {files:?}");
        let mut found: Vec<&str> = named[0]
            .trim_start_matches(&prefix)
            .trim_end_matches(".whl")
            .split('.')
            .collect();
        found.sort_unstable();
        let mut wanted = tag.to_vec();
        wanted.sort_unstable();
        assert_eq!(found, wanted, "{target}: {}", named[0]);
        let wheel = dist.join(named[0]);
        wheels.insert(target, wheel.clone());
        assert!(
            files.contains(&format!("assay-eval-{version}.tgz")),
            "{files:?}"
        );
        assert_eq!(
            files
                .iter()
                .filter(|f| Path::new(f).extension().is_some_and(|e| e == "tgz"))
                .count(),
            2,
            "the main package and {target}'s: {files:?}"
        );
        // auditwheel's own reading of the wheel.
        let shown = Command::new(venv.join("bin/python"))
            .args(["-m", "auditwheel", "show"])
            .arg(&wheel)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&shown.stdout).replace('\n', " ");
        assert!(shown.status.success(), "{target}: {shown:?}");
        let policy = if target.ends_with("musl") {
            "musllinux_1_2"
        } else {
            "manylinux_2_17"
        };
        assert!(said.contains(&format!("\"{policy}")), "{target}: {said}");
        let bin_dir = tmp.path().join(target);
        std::fs::create_dir_all(&bin_dir).unwrap();
        let bin = binary_of(&wheel, &bin_dir);
        assert_eq!(elf_machine(&bin), machine, "{target}");
        if machine == 62 {
            let out = Command::new(&bin).arg("--version").output().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                format!("assay {version}"),
                "{target} runs here"
            );
        }
    }
    // The manylinux2014 wheel installs into a fresh environment and its `assay` runs a project.
    let fresh = tmp.path().join("fresh");
    assert!(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&fresh)
            .status()
            .unwrap()
            .success()
    );
    let wheel = &wheels["x86_64-unknown-linux-gnu"];
    let pip = Command::new(fresh.join("bin/python"))
        .args(["-m", "pip", "install", "--no-index", "--quiet"])
        .arg(wheel)
        .output()
        .unwrap();
    assert!(pip.status.success(), "{pip:?}");
    let project = crate::support::Scratch::example();
    let run = Command::new(fresh.join("bin/assay"))
        .arg("run")
        .arg(project.root())
        .arg("--no-save")
        .env("PATH", fresh.join("bin"))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{run:?}");
}
