//! Tests of `target` (kept apart: the module itself is long).

use std::sync::Mutex;

use crate::{ChatResponse, Usage};

use super::*;

#[derive(Debug, Default)]
struct Echo(Mutex<Vec<ChatRequest>>);

#[async_trait]
impl ChatModel for Echo {
    fn model(&self) -> &'static str {
        "test/echo"
    }
    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        self.0.lock().unwrap().push(request.clone());
        let sys = request.system.clone().unwrap_or_default();
        Ok(ChatResponse {
            text: format!("notes from {sys}\nFINAL ANSWER: {sys}"),
            usage: Usage::default(),
            ..ChatResponse::default()
        })
    }
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn chain(order: &[&str], model: &Arc<Echo>) -> ChainTarget {
    let m: Arc<dyn ChatModel> = model.clone();
    ChainTarget {
        chain: names(order),
        models: order.iter().map(|a| ((*a).to_owned(), m.clone())).collect(),
        max_tokens: 64,
    }
}

#[test]
fn chain_order_defaults_to_the_seed_then_names_with_the_finalizer_last() {
    let mut seed = names(&SEED_CHAIN);
    seed.reverse();
    assert_eq!(ChainTarget::order(&seed, None), names(&SEED_CHAIN));
    assert_eq!(
        ChainTarget::order(&names(&["finalizer", "b", "a"]), None),
        names(&["a", "b", "finalizer"])
    );
    assert_eq!(
        ChainTarget::order(&names(&["a", "b"]), Some(&names(&["b", "a"]))),
        names(&["b", "a"])
    );
}

#[tokio::test]
async fn each_agent_gets_its_prompt_and_the_earlier_outputs() {
    let model = Arc::new(Echo::default());
    let target = chain(&["planner", "finalizer"], &model);
    let prompts: BTreeMap<String, String> = [("planner", "P"), ("finalizer", "F")]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
    let files = [TargetFile {
        path: "ctx/a.txt".into(),
        text: "context".into(),
    }];
    let answer = target.answer(&prompts, "Why?", &files).await.unwrap();
    assert_eq!(answer, "F");
    let seen = model.0.lock().unwrap();
    assert_eq!(seen[0].system.as_deref(), Some("P"));
    let second = &seen[1].messages[0].content;
    assert!(second.contains("## planner\nnotes from P"), "{second}");
    assert!(second.contains("## ctx/a.txt\ncontext"));
    assert!(second.contains("FINAL ANSWER: <the answer>"));
}

#[tokio::test]
async fn the_dry_check_finds_agents_whose_prompts_would_not_arrive() {
    let model = Arc::new(Echo::default());
    let target = chain(&["planner", "finalizer"], &model);
    target
        .dry_check(&names(&["finalizer", "planner"]))
        .await
        .unwrap();
    let e = target
        .dry_check(&names(&["finalizer", "planner", "expert"]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("expert: not in the chain"), "{e}");
    let e = target.dry_check(&names(&["planner"])).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("finalizer: in the chain but has no prompt")
    );
    assert!(
        model.0.lock().unwrap().is_empty(),
        "the dry check calls no model"
    );
}

#[test]
fn a_reply_may_carry_each_agents_output() {
    let a = parse_answer(
            "t",
            r#"{"final_answer": "42", "trace": [{"agent": "planner", "output": "plan"}, {"agent": "finalizer", "output": "FINAL ANSWER: 42"}]}"#,
        )
        .unwrap();
    assert_eq!(a.answered.final_answer, "42");
    assert_eq!(
        a.answered.steps[0],
        ("planner".to_owned(), "plan".to_owned())
    );
    assert_eq!(a.answered.steps.len(), 2);
    assert_eq!(a.contexts, None);
    assert!(
        parse_answer("t", r#"{"final_answer": "x"}"#)
            .unwrap()
            .answered
            .steps
            .is_empty()
    );
    assert!(parse_answer("t", r#"{"final_answer": null}"#).is_err());
}

/// Issue 42: a final answer that is not a string is a bad reply, never an answer.
#[test]
fn a_final_answer_that_is_not_a_string_is_a_bad_reply() {
    for (body, kind) in [
        (r#"{"final_answer": 42}"#, "got a number: 42"),
        (r#"{"final_answer": true}"#, "got a boolean: true"),
        (r#"{"final_answer": ["a"]}"#, "got an array"),
        (r#"{"final_answer": {"text": "a"}}"#, "got an object"),
    ] {
        let e = parse_answer("command `p`", body).unwrap_err();
        assert!(matches!(e, TargetError::BadReply { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("`final_answer` must be a string") && text.contains(kind),
            "{text}"
        );
    }
}

/// Issue 42: a command that prints without end is stopped at its cap, its output never
/// buffered whole; a reply within the cap reads.
#[tokio::test]
async fn a_command_reply_longer_than_the_cap_is_stopped_and_refused() {
    let mut t = script(
        r#"cat >/dev/null; printf '{"final_answer": "'; yes x | tr -d '
' | head -c 50000000; echo '"}'"#,
    );
    t.max_reply_bytes = 4096;
    t.timeout = Duration::from_secs(20);
    let started = std::time::Instant::now();
    let e = t.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap_err();
    assert!(matches!(e, TargetError::BadReply { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("the reply is longer than 4096 bytes (`[answer] max_reply_bytes`)"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it was stopped"
    );
    let mut small = script(r#"cat >/dev/null; echo '{"final_answer": "short"}'"#);
    // 26 bytes with its newline: a cap of 26 takes it, 25 does not.
    small.max_reply_bytes = 26;
    assert_eq!(
        small.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap(),
        "short"
    );
    small.max_reply_bytes = 25;
    assert!(small.answer(&BTreeMap::new(), "Q?", &[]).await.is_err());
}

/// Serves every connection on a local port with `answer` (the raw HTTP reply: head and
/// body), after reading the request; returns the URL.
async fn raw_server(answer: fn() -> Vec<u8>) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                // The head, then the body its Content-Length announces.
                loop {
                    let Ok(n) = stream.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if seen.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let _ = stream.write_all(&answer()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    format!("http://{addr}/answer")
}

/// Issue 42: an endpoint's body is read up to the cap: a declared length over it is
/// refused before the body is read, a chunked body that runs past it is cut off there.
#[tokio::test]
async fn an_http_reply_longer_than_the_cap_is_refused() {
    let declared = raw_server(|| {
            let mut r = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n".to_vec();
            r.extend_from_slice(b"{\"final_answer\": \"");
            r
        })
        .await;
    let chunked = raw_server(|| {
            let mut r = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            let chunk = vec![b'x'; 1000];
            for _ in 0..200 {
                r.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                r.extend_from_slice(&chunk);
                r.extend_from_slice(b"\r\n");
            }
            r.extend_from_slice(b"0\r\n\r\n");
            r
        })
        .await;
    let fine = raw_server(|| {
        let body = br#"{"final_answer": "ok"}"#;
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    })
    .await;
    for url in [&declared, &chunked] {
        let mut t = HttpTarget::new(url, Duration::from_secs(10), true).unwrap();
        t.max_reply_bytes = 100_000;
        let e = t.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap_err();
        assert!(matches!(e, TargetError::BadReply { .. }), "{url}: {e:?}");
        assert!(
            e.to_string()
                .contains("the reply is longer than 100000 bytes"),
            "{url}: {e}"
        );
    }
    let mut t = HttpTarget::new(&fine, Duration::from_secs(10), true).unwrap();
    t.max_reply_bytes = 100_000;
    assert_eq!(t.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap(), "ok");
}

/// A program that writes much to stderr and answers before reading its input is read
/// whole; only the tail of its stderr is kept with a failure.
#[tokio::test]
async fn stderr_is_kept_by_its_tail_and_never_blocks_the_reply() {
    let t = script(r#"yes e | head -c 300000 >&2; echo '{"final_answer": "ok"}'"#);
    assert_eq!(t.answer(&BTreeMap::new(), "Q?", &[]).await.unwrap(), "ok");
    let t = script(r"yes e | head -c 300000 >&2; echo last words >&2; exit 3");
    let e = t
        .answer(&BTreeMap::new(), "Q?", &[])
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("exited with") && e.ends_with("last words"),
        "{e}"
    );
    assert!(e.len() < 3 * KEPT_CHARS, "{}", e.len());
}

#[test]
fn final_answer_extraction() {
    assert_eq!(extract_final_answer("x\nFinal Answer:  42 \n"), "42");
    assert_eq!(extract_final_answer("  just this "), "just this");
    assert_eq!(
        extract_final_answer("FINAL ANSWER: a\nFINAL ANSWER: b"),
        "b"
    );
}

fn script(body: &str) -> CommandTarget {
    CommandTarget {
        command: vec!["sh".into(), "-c".into(), body.into()],
        dir: std::env::temp_dir(),
        timeout: Duration::from_secs(5),
        stateless: false,
        max_reply_bytes: DEFAULT_MAX_REPLY_BYTES,
    }
}

#[tokio::test]
async fn a_command_gets_json_on_stdin_and_answers_on_stdout() {
    let t = script(
        r#"input=$(cat); case "$input" in *'"question":"Q?"'*) echo '{"final_answer":"yes"}';; *) echo '{"final_answer":"no"}';; esac"#,
    );
    let prompts = BTreeMap::from([("a".to_owned(), "p".to_owned())]);
    assert_eq!(t.answer(&prompts, "Q?", &[]).await.unwrap(), "yes");
}

#[tokio::test]
async fn command_failures_keep_stderr_and_are_errors() {
    let prompts = BTreeMap::new();
    let e = script("cat >/dev/null; echo boom >&2; exit 3")
        .answer(&prompts, "q", &[])
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("exited with") && e.to_string().contains("stderr: boom"),
        "{e}"
    );
    let e = script("cat >/dev/null; echo not json")
        .answer(&prompts, "q", &[])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("bad reply"), "{e}");
    let mut slow = script("sleep 5");
    slow.timeout = Duration::from_millis(200);
    let e = slow.answer(&prompts, "q", &[]).await.unwrap_err();
    assert!(e.to_string().contains("timed out"), "{e}");
}

#[tokio::test]
async fn a_command_dry_run_must_echo_every_prompts_hash() {
    // A program that hashes what it received, as a real target would.
    let py = r#"
import sys, json, hashlib
r = json.load(sys.stdin)
assert r.get("dry_run") is True
h = {a: hashlib.sha256(p.encode()).hexdigest() for a, p in r["prompts"].items() if a != "skip"}
print(json.dumps({"prompt_sha256": h}))
"#;
    let t = CommandTarget {
        command: vec!["python3".into(), "-c".into(), py.into()],
        ..script("")
    };
    t.dry_check(&names(&["a", "b"])).await.unwrap();
    let e = t.dry_check(&names(&["a", "skip"])).await.unwrap_err();
    assert!(e.to_string().contains("skip: no hash in the reply"), "{e}");
}

fn answer_case() -> TargetRequest {
    let state = json!({"plan": "pro", "country": "FR"});
    TargetRequest {
        question: "Can I export?".into(),
        files: Vec::new(),
        user_state: state.as_object().cloned(),
        context: Some(vec![
            TargetContext {
                entity: Some("export-guide".into()),
                text: "Pro plans export to CSV.".into(),
            },
            TargetContext {
                entity: None,
                text: "Exports run nightly.".into(),
            },
        ]),
    }
}

#[tokio::test]
async fn an_answer_case_sends_state_and_context_and_reads_the_contexts_used() {
    // Echoes what it received: the reply names the state and the first context, and says
    // it used only the first context.
    let py = r#"
import sys, json
r = json.load(sys.stdin)
ctx = r["context"]
answer = r["user_state"]["plan"] + "|" + ctx[0]["text"] + "|" + str(len(ctx)) + "|" + str("entity" in ctx[1])
print(json.dumps({"final_answer": answer, "contexts": [ctx[0], {"text": "own note"}],
                  "trace": [{"agent": "bot", "output": answer}]}))
"#;
    let t = CommandTarget {
        command: vec!["python3".into(), "-c".into(), py.into()],
        ..script("")
    };
    let prompts = BTreeMap::from([("bot".to_owned(), "Be brief.".to_owned())]);
    let r = t.respond(&prompts, &answer_case()).await.unwrap();
    assert_eq!(
        r.answered.final_answer,
        "pro|Pro plans export to CSV.|2|False"
    );
    assert_eq!(r.answered.steps.len(), 1);
    assert_eq!(
        r.contexts,
        Some(vec![
            TargetContext {
                entity: Some("export-guide".into()),
                text: "Pro plans export to CSV.".into(),
            },
            TargetContext {
                entity: None,
                text: "own note".into(),
            },
        ])
    );
}

#[tokio::test]
async fn an_optimizer_case_sends_neither_state_nor_context() {
    let t = script(
        r#"input=$(cat); case "$input" in *user_state*|*'"context"'*) echo '{"final_answer":"extra keys"}';; *) echo '{"final_answer":"plain"}';; esac"#,
    );
    let prompts = BTreeMap::from([("a".to_owned(), "p".to_owned())]);
    assert_eq!(t.answer(&prompts, "Q?", &[]).await.unwrap(), "plain");
    let body = TargetRequest::question("Q?", &[]).body(&prompts);
    assert_eq!(body, request_body(&prompts, "Q?", &[]));
    let full = answer_case().body(&prompts);
    assert_eq!(full["user_state"]["country"], "FR");
    assert_eq!(full["context"][0]["entity"], "export-guide");
    assert!(full["context"][1].get("entity").is_none(), "{full}");
    // An answer case with an empty state still says so.
    let empty = TargetRequest {
        user_state: Some(serde_json::Map::new()),
        context: Some(Vec::new()),
        ..TargetRequest::question("Q?", &[])
    };
    assert_eq!(empty.body(&prompts)["user_state"], json!({}));
    assert_eq!(empty.body(&prompts)["context"], json!([]));
}

#[test]
fn a_reply_with_malformed_contexts_is_a_bad_reply() {
    let e = parse_answer(
        "t",
        r#"{"final_answer": "x", "contexts": [{"entity": "a"}]}"#,
    )
    .unwrap_err();
    assert!(
        matches!(e, TargetError::BadReply { .. }) && e.to_string().contains("contexts"),
        "{e}"
    );
    let e = parse_answer("t", r#"{"final_answer": "x", "contexts": "all of them"}"#).unwrap_err();
    assert!(matches!(e, TargetError::BadReply { .. }), "{e}");
}

#[test]
fn a_reply_may_report_its_tool_calls_in_order() {
    let r = parse_answer(
        "t",
        r#"{"final_answer": "x", "tool_calls": [
                {"name": "find_loan", "arguments": {"book": 42}, "result": "on loan"},
                {"name": "renew_loan", "arguments": "{\"book\": 42}", "is_error": true},
                {"name": "ping"}]}"#,
    )
    .unwrap();
    let calls = r.tool_calls.unwrap();
    assert_eq!(
        calls[0],
        TargetToolCall {
            name: "find_loan".into(),
            arguments: json!({"book": 42}),
            result: Some("on loan".into()),
            is_error: false,
        }
    );
    assert_eq!(
        calls[1].arguments,
        json!({"book": 42}),
        "a JSON string is read"
    );
    assert!(calls[1].is_error && calls[1].result.is_none());
    assert_eq!(calls[2].arguments, json!({}));
    assert_eq!(
        parse_answer("t", r#"{"final_answer": "x"}"#)
            .unwrap()
            .tool_calls,
        None
    );
    assert_eq!(
        parse_answer("t", r#"{"final_answer": "x", "tool_calls": []}"#)
            .unwrap()
            .tool_calls,
        Some(Vec::new())
    );
}

#[test]
fn a_reply_with_malformed_tool_calls_is_a_bad_reply() {
    for (body, why) in [
        (
            r#"{"final_answer": "x", "tool_calls": "some"}"#,
            "tool_calls",
        ),
        (
            r#"{"final_answer": "x", "tool_calls": [{"arguments": {}}]}"#,
            "name",
        ),
        (
            r#"{"final_answer": "x", "tool_calls": [{"name": " "}]}"#,
            "tool_calls[0].name",
        ),
        (
            r#"{"final_answer": "x", "tool_calls": [{"name": "a", "arguments": [1]}]}"#,
            "tool_calls[0].arguments",
        ),
    ] {
        let e = parse_answer("t", body).unwrap_err();
        assert!(
            matches!(e, TargetError::BadReply { .. }) && e.to_string().contains(why),
            "{body}: {e}"
        );
    }
}

#[tokio::test]
async fn the_chain_gets_the_context_as_files_and_the_state_as_a_section() {
    let model = Arc::new(Echo::default());
    let target = chain(&["planner", "finalizer"], &model);
    let prompts: BTreeMap<String, String> = [("planner", "P"), ("finalizer", "F")]
        .into_iter()
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
        .collect();
    let mut case = answer_case();
    case.files.push(TargetFile {
        path: "case.txt".into(),
        text: "from the case".into(),
    });
    let r = target.respond(&prompts, &case).await.unwrap();
    assert_eq!(r.answered.final_answer, "F");
    assert_eq!(r.contexts, None, "the chain reports no contexts of its own");
    {
        let seen = model.0.lock().unwrap();
        for request in seen.iter() {
            let user = &request.messages[0].content;
            assert!(
                user.contains("## export-guide\nPro plans export to CSV."),
                "{user}"
            );
            assert!(
                user.contains("## context-2\nExports run nightly."),
                "{user}"
            );
            assert!(user.contains("## case.txt\nfrom the case"), "{user}");
            assert!(user.contains("# User state\n"), "{user}");
            assert!(user.contains(r#""plan": "pro""#), "{user}");
            // The case's files first, then the context in rank order.
            let at = |needle: &str| user.find(needle).unwrap();
            assert!(at("## case.txt") < at("## export-guide"));
            assert!(at("## export-guide") < at("## context-2"));
        }
    }
    // An empty state adds no section, and without context the optimizer's requests are
    // unchanged.
    model.0.lock().unwrap().clear();
    let plain = TargetRequest {
        user_state: Some(serde_json::Map::new()),
        context: Some(Vec::new()),
        ..TargetRequest::question("Why?", &[])
    };
    target.respond(&prompts, &plain).await.unwrap();
    target.answer(&prompts, "Why?", &[]).await.unwrap();
    let seen = model.0.lock().unwrap();
    assert_eq!(seen.len(), 4);
    assert!(!seen[0].messages[0].content.contains("# User state"));
    assert!(!seen[0].messages[0].content.contains("# Attached files"));
    assert_eq!(seen[0], seen[2]);
    assert_eq!(seen[1], seen[3]);
}
