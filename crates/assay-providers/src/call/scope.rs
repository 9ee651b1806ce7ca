//! Which calls a provider batch answered, for the call wrapper's accounting and fallback: the
//! wrapper runs a call inside [`scoped`]; a batched model ([`crate::Batcher`]) reads the mode
//! there and notes what it did.

use std::future::Future;

/// How a call inside the call wrapper reaches a batched model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BatchMode {
    /// Through the batch queue.
    Batch,
    /// Interactively (a batch did not run it).
    Interactive,
}

#[derive(Debug)]
struct Scope {
    mode: BatchMode,
    /// Answers a batch gave within the scope.
    batched: u32,
    /// A batch did not run a request of the scope: the call is to be sent interactively.
    fallback: bool,
}

tokio::task_local! {
    static SCOPE: std::cell::RefCell<Scope>;
}

/// Runs `call` with batched models in `mode`; returns its output, how many answers came from
/// a batch, and whether a batch left a request unrun (the call is to be made again
/// interactively).
pub(crate) async fn scoped<F: Future>(mode: BatchMode, call: F) -> (F::Output, u32, bool) {
    SCOPE
        .scope(
            std::cell::RefCell::new(Scope {
                mode,
                batched: 0,
                fallback: false,
            }),
            async move {
                let output = call.await;
                let (batched, fallback) = SCOPE.with(|s| {
                    let s = s.borrow();
                    (s.batched, s.fallback)
                });
                (output, batched, fallback)
            },
        )
        .await
}

pub(crate) fn current_batch_mode() -> Option<BatchMode> {
    SCOPE.try_with(|s| s.borrow().mode).ok()
}

pub(crate) fn note_batched(batched: bool) {
    let _ = SCOPE.try_with(|s| {
        let mut s = s.borrow_mut();
        if batched {
            s.batched += 1;
        } else {
            s.fallback = true;
        }
    });
}
