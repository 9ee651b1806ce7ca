//! User state (003 §5) and the STATE conditions of the seed handlers (000 §6.2).

use assay_core::UserState;
use assay_core::condition::Conditions;
use assay_kb::{KbError, StateStore};

use crate::backend::Backend;
use chrono::Duration;
use serde_json::{Map, Value, json};

use crate::at;

fn map(value: Value) -> Map<String, Value> {
    let Value::Object(map) = value else {
        panic!("not an object: {value}")
    };
    map
}

fn a_new_user_gets_the_defaults<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let state = store.get_user_state("new", at(1, 9)).unwrap();
    assert_eq!(state["user_type"], "PARENT");
    assert_eq!(state["conversation_count"], 0);
    assert_eq!(state["is_first_conversation"], true);
    assert!(!state.contains_key("days_since_last"));
    assert!(!state.contains_key("last_rating"));
}

fn unknown_fields_go_to_state_data_and_come_back<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let updates = map(json!({
        "user_type": "CLINICIAN", "session_type": "debrief", "has_pending_debrief": true,
        "children": [{"age": 7}], "mood": "tired",
    }));
    let state = store.update_user_state("u1", &updates, at(1, 9)).unwrap();
    assert_eq!(state["user_type"], "CLINICIAN");
    assert_eq!(state["has_pending_debrief"], true);

    let store = backend.reopen();
    let state = store.get_user_state("u1", at(2, 9)).unwrap();
    assert_eq!(state["session_type"], "debrief");
    assert_eq!(state["children"], json!([{"age": 7}]));
    assert_eq!(state["mood"], "tired");
    let (user_type, data) = backend.user_row("u1");
    assert_eq!(user_type, "CLINICIAN");
    assert_eq!(
        data,
        json!({"has_pending_debrief": true, "children": [{"age": 7}], "mood": "tired"})
    );

    let state = store
        .update_user_state("u1", &map(json!({"mood": null})), at(2, 9))
        .unwrap();
    assert!(!state.contains_key("mood"));
    assert_eq!(state["children"], json!([{"age": 7}]));
}

fn record_interaction_counts_rates_and_dates<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let topics = ["exchanges".to_owned(), "school".to_owned()];
    let state = store
        .record_interaction("u1", Some(4), &topics, &["biff".into()], at(1, 9))
        .unwrap();
    assert_eq!(state["conversation_count"], 1);
    assert_eq!(state["is_first_conversation"], false);
    assert_eq!(
        (&state["interaction_rating"], &state["last_rating"]),
        (&json!(4), &json!(4))
    );
    assert_eq!(state["days_since_last"], 0);
    assert_eq!(state["first_seen"], "2026-11-01T09:00:00.000000Z");

    let state = store
        .record_interaction(
            "u1",
            None,
            &["school".into(), "holidays".into()],
            &[],
            at(3, 9),
        )
        .unwrap();
    assert_eq!(state["conversation_count"], 2);
    assert_eq!(
        state["last_rating"], 4,
        "an unrated interaction keeps the last rating"
    );
    assert_eq!(
        state["last_topics"],
        json!(["exchanges", "school", "holidays"])
    );
    assert_eq!(state["skills_practiced"], json!(["biff"]));
    assert_eq!(state["first_seen"], "2026-11-01T09:00:00.000000Z");
    assert_eq!(state["last_seen"], "2026-11-03T09:00:00.000000Z");

    let later = store.get_user_state("u1", at(13, 8)).unwrap();
    assert_eq!(later["days_since_last"], 9, "whole days: 9 days 23 hours");
}

fn a_rating_out_of_range_is_an_error_and_writes_nothing<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    for rating in [0, 6] {
        let err = store
            .record_interaction("u1", Some(rating), &[], &[], at(1, 9))
            .unwrap_err();
        assert!(
            matches!(&err, KbError::Invalid(m) if m.contains("out of range (1 to 5)")),
            "{err}"
        );
    }
    let err = store
        .update_user_state("u1", &map(json!({"last_rating": 9, "mood": "x"})), at(1, 9))
        .unwrap_err();
    assert!(
        err.to_string().contains("rating 9 is out of range"),
        "{err}"
    );
    let state = store.get_user_state("u1", at(1, 9)).unwrap();
    assert_eq!(state["conversation_count"], 0);
    assert!(!state.contains_key("mood"));
}

/// The STATE conditions of the six seed handlers (000 §6.2).
fn seed_handlers() -> Vec<(&'static str, Conditions)> {
    let raw = json!({
        "handler_first_conversation": {"is_first_conversation": {"eq": true}},
        "handler_returning_user": {"is_first_conversation": {"eq": false}, "days_since_last": {"gte": 7}},
        "handler_post_escalation": {"is_first_conversation": {"eq": false}, "last_rating": {"lte": 2}},
        "handler_celebrating_wins": {"is_first_conversation": {"eq": false}, "last_rating": {"gte": 4}},
        "handler_clinician_mode": {"user_type": {"in": ["CLINICIAN", "PROFESSIONAL"]}},
        "handler_interaction_debrief": {"is_first_conversation": {"eq": false}, "has_pending_debrief": {"eq": true}},
    });
    let ids = [
        "handler_first_conversation",
        "handler_returning_user",
        "handler_post_escalation",
        "handler_celebrating_wins",
        "handler_clinician_mode",
        "handler_interaction_debrief",
    ];
    ids.into_iter()
        .map(|id| (id, Conditions::parse(raw[id].as_object().unwrap()).unwrap()))
        .collect()
}

fn triggered(state: &UserState) -> Vec<&'static str> {
    seed_handlers()
        .into_iter()
        .filter(|(_, c)| c.matches(state))
        .map(|(id, _)| id)
        .collect()
}

fn states_from_the_store_trigger_the_seed_handlers<B: Backend>() {
    let backend = B::new();
    let store = backend.store();
    let now = at(20, 9);
    let ago = |days: i64| now - Duration::days(days);

    let new_user = store.get_user_state("new", now).unwrap();
    assert_eq!(triggered(&new_user), ["handler_first_conversation"]);

    store
        .record_interaction("back", Some(5), &[], &[], ago(10))
        .unwrap();
    let back = store.get_user_state("back", now).unwrap();
    assert_eq!(
        triggered(&back),
        ["handler_returning_user", "handler_celebrating_wins"]
    );

    store
        .record_interaction("upset", Some(1), &[], &[], ago(1))
        .unwrap();
    assert_eq!(
        triggered(&store.get_user_state("upset", now).unwrap()),
        ["handler_post_escalation"]
    );

    store
        .record_interaction("meh", Some(3), &[], &[], ago(3))
        .unwrap();
    assert!(triggered(&store.get_user_state("meh", now).unwrap()).is_empty());

    let clinician = store
        .update_user_state("doc", &map(json!({"user_type": "CLINICIAN"})), now)
        .unwrap();
    assert_eq!(
        triggered(&clinician),
        ["handler_first_conversation", "handler_clinician_mode"]
    );

    store
        .record_interaction("debrief", None, &[], &[], ago(2))
        .unwrap();
    let debrief = store
        .update_user_state("debrief", &map(json!({"has_pending_debrief": true})), now)
        .unwrap();
    assert_eq!(triggered(&debrief), ["handler_interaction_debrief"]);

    // A state bank's user_state (000 §5.2 keys) reproduces itself through the store.
    let fixture = map(
        json!({"is_first_conversation": false, "days_since_last": 14, "last_rating": 2, "user_type": "PROFESSIONAL"}),
    );
    let state = store.update_user_state("fixture", &fixture, now).unwrap();
    for (key, value) in &fixture {
        assert_eq!(&state[key], value, "{key}");
    }
    assert_eq!(
        triggered(&state),
        [
            "handler_returning_user",
            "handler_post_escalation",
            "handler_clinician_mode"
        ]
    );
}

crate::backend::backend_tests!(
    a_new_user_gets_the_defaults,
    unknown_fields_go_to_state_data_and_come_back,
    record_interaction_counts_rates_and_dates,
    a_rating_out_of_range_is_an_error_and_writes_nothing,
    states_from_the_store_trigger_the_seed_handlers,
);
