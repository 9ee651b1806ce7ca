//! `assay judge` as a newcomer uses it: from inside the labels' folder, with a bare file name.

use std::process::Command;

use crate::sim_provider::Behaviour;
use crate::simulate::{env_with, project, provider};

#[test]
fn agree_takes_a_bare_labels_file_name_from_inside_its_folder() {
    let provider = provider(Behaviour::default());
    let scratch = project(&provider);
    let root = scratch.root().to_str().unwrap().to_owned();
    let env = env_with(&[]);
    let out = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args([
            "judge",
            "agree",
            "judge_labels.yaml",
            "--model",
            "anthropic/judge",
            "--project",
            &root,
        ])
        .current_dir(scratch.path("sim/labels"))
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(!stderr.contains("empty path"), "{stderr}");
    assert!(stdout.contains("against 6 labelled item(s)"), "{stdout}");
}
