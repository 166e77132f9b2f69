//! The `#[cancellable]` attribute. Use it through the `cancelkit` crate, which re-exports it
//! (`cancelkit::cancellable`) together with the runtime items the expansion refers to.

#![forbid(unsafe_code)]

mod expand;

use proc_macro::TokenStream;

/// Makes an `async fn` returning `Result<T, E>` (with `E: From<cancelkit::Cancelled>`)
/// cancellable: by the peer, by a timeout, or by the caller's scope.
///
/// The body runs in a child of the ambient cancellation scope (a fresh root scope if there is
/// none), so nested cancellable calls and `cancelkit::spawn`ed tasks form a tree: cancelling an
/// outer call cancels everything under it, cancelling an inner one leaves the outer running.
///
/// Options, combinable except where noted:
///
/// - none (abort mode): the body is raced against the scope's token and dropped at its next
///   `.await` once cancelled; the call returns `Err(E::from(Cancelled { reason }))`. A body that
///   completes in the same poll as the cancel wins, and a call cancelled before it starts never
///   runs its body.
/// - `cooperative`: no race; the body observes `cancelkit::is_cancelled()` /
///   `cancelkit::cancelled()` and returns what it likes (partial results).
/// - `grace = "2s"` (with `cooperative`; units as for `timeout`): cooperative first, abort after
///   the grace. Once the call is cancelled the body has that long to wind down and return (a
///   partial result, say); if it has not, it is dropped and the call returns
///   `Err(E::from(Cancelled { reason }))` with the recorded reason.
/// - `timeout = "30s"` (units `ms`, `s`, `m`): cancel the call's scope after the duration; the
///   reason is `CancelReason::Timeout`.
/// - `on_cancel = path`: on cancellation return `Ok(path())` instead of an error (ACP
///   `session/prompt` answers `stopReason: "cancelled"`). Not with `cooperative`.
/// - `token = param`: take the parent scope from that `CancellationToken` parameter instead of
///   the ambient scope (for frameworks that hand a token in, such as rmcp's `ct`), or from the
///   ACP SDK's `RequestCancellation` (cancelkit feature `acp`).
/// - `crate = "path"`: where the runtime items live, for crates that re-export cancelkit.
///
/// Misuse is reported at the offending token, and the function is still emitted unchanged so
/// the rest of the code keeps type-checking.
#[proc_macro_attribute]
pub fn cancellable(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(attr.into(), item.into()).into()
}
