//! Nested scopes: levels cancelled from outside or inside, `spawn`, no ambient scope, a
//! token parameter as the parent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cancelkit::{CancelReason, CancellationToken, JsonRpcError, Scope, cancellable, with_token};
use tokio::sync::oneshot;

use crate::completion::finish_on_signal;
use crate::{flag, reason_of};

/// How deep [`level`] goes, and so how many tokens it reports.
const LEVELS: usize = 3;

/// Three levels; each level reports its token outwards and holds a guard.
#[cancellable]
async fn level(
    depth: usize,
    tokens: tokio::sync::mpsc::Sender<(usize, CancellationToken)>,
    dropped: Arc<[AtomicBool; 3]>,
    release: Arc<tokio::sync::Notify>,
) -> Result<usize, JsonRpcError> {
    struct Guard(Arc<[AtomicBool; 3]>, usize);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0[self.1].store(true, Ordering::SeqCst);
        }
    }
    let _guard = Guard(dropped.clone(), depth);
    // One token per level, three levels: the channel holds all three (`LEVELS`).
    tokens
        .try_send((depth, cancelkit::current().unwrap()))
        .unwrap();
    let inner = if depth < 2 {
        Box::pin(level(depth + 1, tokens, dropped, release.clone())).await
    } else {
        release.notified().await;
        Ok(depth)
    };
    // An inner cancellation is an error the outer level can handle and go on.
    Ok(depth * 10 + inner.unwrap_or(9))
}

#[tokio::test]
async fn cancelling_the_outer_level_cancels_all_three() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(LEVELS);
    let dropped = Arc::new([
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
    ]);
    let (root, canceller) = Scope::root();
    let call = tokio::spawn(root.run(level(
        0,
        tx,
        dropped.clone(),
        Arc::new(tokio::sync::Notify::new()),
    )));
    for _ in 0..3 {
        rx.recv().await.unwrap();
    }
    canceller.cancel(CancelReason::Peer(Some("stop".into())));
    let error = call.await.unwrap().unwrap_err();
    // The outer level is not polled again, so it cannot turn the inner error into a result.
    assert_eq!(reason_of(&error), "cancelled by the peer: stop");
    assert!(dropped.iter().all(|d| d.load(Ordering::SeqCst)));
}

#[tokio::test]
async fn cancelling_the_inner_level_leaves_the_outer_running() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(LEVELS);
    let dropped = Arc::new([
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
    ]);
    let release = Arc::new(tokio::sync::Notify::new());
    let call = tokio::spawn(level(0, tx, dropped.clone(), release));
    let mut tokens = Vec::new();
    for _ in 0..3 {
        tokens.push(rx.recv().await.unwrap());
    }
    tokens.sort_by_key(|(depth, _)| *depth);
    tokens[2].1.cancel();
    // Level 2 fails with -32800, level 1 maps it to 9 and finishes, level 0 finishes.
    assert_eq!(call.await.unwrap().unwrap(), 19);
    assert!(dropped[2].load(Ordering::SeqCst));
    assert!(!tokens[0].1.is_cancelled() && !tokens[1].1.is_cancelled());
}

#[tokio::test]
async fn spawn_inherits_cancellation() {
    let (root, canceller) = Scope::root();
    let (tx, rx) = oneshot::channel();
    // `spawn` reads the ambient scope when called, so call it inside the scope.
    let child = root
        .run(async move {
            let handle = cancelkit::spawn(async move {
                tx.send(()).unwrap();
                cancelkit::cancelled().await;
                cancelkit::cancel_reason()
            });
            Ok::<_, ()>(handle)
        })
        .await
        .unwrap();
    rx.await.unwrap();
    canceller.cancel(CancelReason::Shutdown);
    assert_eq!(child.await.unwrap(), Some(CancelReason::Shutdown));
}

#[tokio::test]
async fn works_without_any_ambient_scope() {
    assert!(cancelkit::current().is_none());
    let (tx, rx) = oneshot::channel();
    tx.send(3).unwrap();
    assert_eq!(finish_on_signal(rx).await.unwrap(), 3);
}

#[cancellable(token = ct)]
async fn with_token_parameter(
    ct: CancellationToken,
    started: Arc<AtomicBool>,
) -> Result<(), JsonRpcError> {
    assert!(cancelkit::current().is_some());
    started.store(true, Ordering::SeqCst);
    std::future::pending().await
}

#[tokio::test]
async fn a_token_parameter_is_the_parent() {
    let ct = CancellationToken::new();
    let started = flag();
    // An ambient scope that is never cancelled: the parameter, not the ambient scope, decides.
    let call = tokio::spawn(with_token(
        CancellationToken::new(),
        with_token_parameter(ct.clone(), started.clone()),
    ));
    while !started.load(Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    ct.cancel();
    let error = call.await.unwrap().unwrap_err();
    assert_eq!(reason_of(&error), "cancelled by its caller");
}
