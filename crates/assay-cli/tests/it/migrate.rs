//! Backward compatibility (000 §9.2, appendix): pre-V2 banks load with a warning;
//! `assay banks migrate` adds the two fields in place, keeps a backup, changes nothing else.

use serde_json::Value;

use crate::support::Scratch;

const BANK: &str = "test_banks/semantic/parent_test_bank.json";

fn strip_header(p: &Scratch) -> Value {
    let mut bank = p.json(BANK);
    let obj = bank.as_object_mut().unwrap();
    obj.remove("bank_type");
    obj.remove("version");
    p.write_json(BANK, &bank);
    bank
}

#[test]
fn a_pre_v2_bank_loads_with_a_warning() {
    let p = Scratch::example();
    strip_header(&p);
    let run = p.assay(&["expectations", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("pre-V2 layout"), "{run:?}");
    assert_eq!(run.json()["expectations"].as_array().unwrap().len(), 94);
}

#[test]
fn migrate_adds_the_fields_and_changes_nothing_else() {
    let p = Scratch::example();
    let original_value = strip_header(&p);
    let original_text = p.read(BANK);

    let run = p.assay(&["banks", "migrate"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("migrated"), "{run:?}");
    assert!(
        run.stdout.contains("current"),
        "the other banks already have both fields: {run:?}"
    );

    assert_eq!(
        p.read(&format!("{BANK}.bak")),
        original_text,
        "the original is kept byte for byte"
    );
    let mut migrated = p.json(BANK);
    assert_eq!(migrated["bank_type"], "SEMANTIC");
    assert_eq!(migrated["version"], "2.0");
    let obj = migrated.as_object_mut().unwrap();
    obj.remove("bank_type");
    obj.remove("version");
    assert_eq!(migrated, original_value);
    // Every line of the original is still there, in order.
    let new_text = p.read(BANK);
    let kept: Vec<&str> = new_text
        .lines()
        .filter(|l| !l.contains("\"bank_type\"") && !l.contains("\"version\""))
        .collect();
    assert_eq!(kept, original_text.lines().collect::<Vec<_>>());

    let run = p.assay(&["validate"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stderr.contains("pre-V2"), "{run:?}");

    // Migrating again changes nothing.
    let run = p.assay(&["banks", "migrate"]);
    assert!(!run.stdout.contains("migrated"), "{run:?}");
    assert_eq!(p.read(BANK), new_text);
}

#[test]
fn migrate_writes_nothing_when_a_bank_is_invalid() {
    let p = Scratch::example();
    strip_header(&p);
    let before = p.read(BANK);
    p.write(
        "test_banks/state/state_handler_tests.json",
        "{\"tests\": [{\"test_id\": 3}]}",
    );
    let run = p.assay(&["banks", "migrate"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(p.read(BANK), before);
    assert!(!p.path(&format!("{BANK}.bak")).exists());
}
