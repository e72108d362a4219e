//! The controller kit every operator runs with, at the bottom of the house: the kube-runtime shell
//! ([`shell`]: a `Controller` with a logging error policy, publishing events, the API answers a
//! reconciler treats as success), the event recorder ([`events`]), the resync period and the stream that
//! re-checks every object when this replica becomes leader. It imports kube, k8s-openapi and the async
//! runtime, nothing of quotagate's.

use std::time::Duration;

use tokio::sync::watch;

pub mod events;
pub mod shell;

/// How often a queue-managed job is reconciled with no event (see the end of the job reconciler).
pub const RESYNC: Duration = Duration::from_secs(30);

/// One item each time this replica becomes leader (for `Controller::reconcile_all_on`).
pub(crate) fn became_leader(
    leader: &mut watch::Receiver<bool>,
) -> impl futures::Stream<Item = ()> + Send + Sync + 'static {
    let rx = leader.clone();
    futures::stream::unfold(rx, |mut rx| async move {
        loop {
            rx.changed().await.ok()?;
            if *rx.borrow() {
                return Some(((), rx));
            }
        }
    })
}
