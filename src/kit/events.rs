//! Kubernetes Events (`events.k8s.io/v1`) with series, published as kube-runtime's `Recorder` publishes
//! them, at a constant cost per event.
//!
//! kube-runtime's `Recorder` expires its cache by scanning all of it on every publish, and keeps each
//! event whole for six minutes. A manager that publishes N events within that time pays O(N) per event:
//! in `quotagate bench e2e --config baseline` (30,000 events in a run) that scan was the largest single
//! cost of the admission loop, on its critical path. Here entries expire from a queue kept in time order,
//! the cache holds only what a series patch needs, and it is bounded as client-go's event correlator is
//! (4096 entries), so memory does not grow with the number of events either.
//!
//! Same semantics as kube-runtime's, with client-go's correlator on the note: an event whose type, action,
//! reason, note, regarding and related objects match one published by this recorder within six minutes bumps that event's `series` (count and
//! `lastObservedTime`) instead of creating another; the first one is created as
//! `<regarding name>.<nanoseconds in hex>` with this reporter as reporting controller and instance.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Api, Client};

/// How long a published event can still be continued as a series (kube-runtime's and client-go's).
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);
/// At most this many events are remembered for series (client-go's correlator LRU size).
const MAX_CACHED: usize = 4096;

/// An object as an event key sees it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Ref {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
}

impl From<&ObjectReference> for Ref {
    fn from(r: &ObjectReference) -> Self {
        Ref {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }
    }
}

/// What makes two events one series (the reporter is the recorder's own, so it is left out). The note
/// is part of it, as in client-go's event correlator: four pods deleted are four events, not one event
/// counted four times under the first pod's name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    type_: EventType,
    action: String,
    reason: String,
    note: Option<String>,
    regarding: Ref,
    related: Option<Ref>,
}

impl Key {
    fn new(ev: &Event, regarding: &ObjectReference) -> Self {
        Key {
            type_: ev.type_,
            action: ev.action.clone(),
            reason: ev.reason.clone(),
            note: ev.note.clone(),
            regarding: regarding.into(),
            related: ev.secondary.as_ref().map(Ref::from),
        }
    }
}

/// A published event, as much as a series patch needs.
#[derive(Clone, Debug)]
struct Published {
    name: String,
    count: i32,
    last: Timestamp,
}

/// The series cache: entries by key, and (time, key) in the order they were last observed. A key
/// observed again is pushed again; its older queue entry is skipped when it comes up.
#[derive(Default)]
struct Cache {
    entries: HashMap<Key, Published>,
    order: VecDeque<(Timestamp, Key)>,
}

impl Cache {
    /// Drops what has expired by `now`, and the oldest beyond the bound. Amortized O(1) per publish:
    /// every queue entry is pushed once and popped once.
    fn expire(&mut self, now: Timestamp) {
        while let Some((t, _)) = self.order.front() {
            let expired = *t + SERIES_TTL <= now;
            if !expired && self.entries.len() <= MAX_CACHED && self.order.len() <= 2 * MAX_CACHED {
                break;
            }
            let Some((t, k)) = self.order.pop_front() else {
                break;
            };
            // Only the latest queue entry of a key removes it: an older one means it was seen again.
            if self.entries.get(&k).is_some_and(|p| p.last == t) {
                self.entries.remove(&k);
            }
        }
    }

    fn observe(&mut self, key: Key, published: Published) {
        self.order.push_back((published.last, key.clone()));
        self.entries.insert(key, published);
    }
}

/// Publishes events for one reporter. Clones share the series cache.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    cache: Arc<Mutex<Cache>>,
}

impl Recorder {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Recorder {
            client,
            reporter,
            cache: Arc::default(),
        }
    }

    /// Creates the event, or continues its series when the same event was published within six
    /// minutes. Cluster-scoped objects' events go to the `default` namespace.
    pub async fn publish(&self, ev: &Event, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = Key::new(ev, regarding);
        let previous = match self.cache.lock() {
            Ok(mut c) => {
                c.expire(now);
                c.entries.get(&key).cloned()
            }
            // A poisoned cache only loses series: publish as a new event.
            Err(_) => None,
        };
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let published = match previous {
            Some(p) => {
                let count = p.count.saturating_add(1);
                let patch =
                    serde_json::json!({"series": {"count": count, "lastObservedTime": MicroTime(now)}});
                api.patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                Published {
                    count,
                    last: now,
                    ..p
                }
            }
            None => {
                let event = self.event(ev, regarding, &namespace, now);
                let name = event.metadata.name.clone().unwrap_or_default();
                api.create(&PostParams::default(), &event).await?;
                Published {
                    name,
                    count: 1,
                    last: now,
                }
            }
        };
        if let Ok(mut c) = self.cache.lock() {
            c.observe(key, published);
        }
        Ok(())
    }

    fn event(&self, ev: &Event, regarding: &ObjectReference, namespace: &str, now: Timestamp) -> K8sEvent {
        let base = regarding.name.as_deref().unwrap_or(&self.reporter.controller);
        K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: ev.note.as_deref().map(truncate_note),
            metadata: ObjectMeta {
                namespace: Some(namespace.to_string()),
                name: Some(format!("{base}.{:x}", now.as_nanosecond())),
                ..Default::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            related: ev.secondary.clone(),
            ..Default::default()
        }
    }
}

/// The most an `events.k8s.io/v1` Event's note may hold (the API server refuses more).
pub const MAX_NOTE_BYTES: usize = 1024;

/// A note cut to `MAX_NOTE_BYTES` on a character boundary, as Kueue's `TruncateEventMessage` does
/// (ending in "..." when cut), so a long scheduler message is shortened, not refused.
pub fn truncate_note(note: &str) -> String {
    if note.len() <= MAX_NOTE_BYTES {
        return note.to_string();
    }
    let mut end = MAX_NOTE_BYTES - 3;
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &note[..end])
}

/// Events handed to a task that publishes them in order, for a caller that must not wait on the API
/// for each (the admission loop: two events per admission, which made event writes two thirds of
/// its writes). Bounded as client-go's broadcaster is: when the task falls behind by `capacity`
/// events, newer ones are dropped and counted, never queued without limit.
#[derive(Clone)]
pub struct QueuedRecorder {
    tx: tokio::sync::mpsc::Sender<(Event, ObjectReference)>,
    dropped: DroppedEvents,
}

impl QueuedRecorder {
    /// Starts the publishing task; it ends once every clone of the returned sender is dropped. Drops
    /// are counted in `dropped`, which the caller keeps to report them.
    pub fn spawn(
        recorder: Recorder,
        capacity: usize,
        dropped: DroppedEvents,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(Event, ObjectReference)>(capacity.max(1));
        let task = tokio::spawn(async move {
            while let Some((ev, obj)) = rx.recv().await {
                if let Err(e) = recorder.publish(&ev, &obj).await {
                    tracing::debug!(error = %e, reason = %ev.reason, "publishing event failed");
                }
            }
        });
        (QueuedRecorder { tx, dropped }, task)
    }

    pub fn publish(&self, ev: Event, regarding: ObjectReference) {
        if self.tx.try_send((ev, regarding)).is_err() {
            self.dropped.count_one();
        }
    }
}

/// How many events the queue dropped. A flood of drops is one log line (the first) and a counter,
/// `quotagate_events_dropped_total`; the manager logs the total once when it stops.
#[derive(Clone, Debug, Default)]
pub struct DroppedEvents(Arc<std::sync::atomic::AtomicU64>);

impl DroppedEvents {
    /// Counts a drop; true for the first one, which is logged.
    fn count_one(&self) -> bool {
        let first = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed) == 0;
        if first {
            tracing::warn!(
                "event queue full: events are being dropped; they are counted in \
                 quotagate_events_dropped_total and their total is logged when the manager stops"
            );
        }
        first
    }

    pub fn total(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The counter in the OpenMetrics text the metrics endpoint serves.
    pub fn render(&self) -> String {
        format!(
            "# HELP quotagate_events_dropped Events not published because the event queue was full.\n\
             # TYPE quotagate_events_dropped counter\n\
             quotagate_events_dropped_total {}\n",
            self.total()
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dropped_events_are_logged_once_and_counted_in_the_metric() {
        let d = super::DroppedEvents::default();
        assert!(d.render().ends_with("quotagate_events_dropped_total 0\n"));
        let firsts = (0..2500).filter(|_| d.clone().count_one()).count();
        assert_eq!(firsts, 1, "only the first drop is logged");
        assert_eq!(d.total(), 2500);
        assert!(d.render().contains("# TYPE quotagate_events_dropped counter\n"));
        assert!(d.render().ends_with("quotagate_events_dropped_total 2500\n"));
    }

    #[test]
    fn a_long_note_is_cut_to_what_the_api_takes_on_a_character_boundary() {
        assert_eq!(super::truncate_note("short"), "short");
        let long = "é".repeat(800);
        let cut = super::truncate_note(&long);
        assert!(
            cut.len() <= super::MAX_NOTE_BYTES && cut.ends_with("..."),
            "{}",
            cut.len()
        );
        assert!(cut.trim_end_matches("...").chars().all(|c| c == 'é'));
    }

    use super::*;

    fn key(name: &str) -> Key {
        Key {
            type_: EventType::Normal,
            action: "A".into(),
            reason: "R".into(),
            note: None,
            regarding: Ref {
                api_version: None,
                kind: None,
                namespace: Some("ns".into()),
                name: Some(name.into()),
                uid: None,
            },
            related: None,
        }
    }

    fn published(name: &str, last: Timestamp) -> Published {
        Published {
            name: name.into(),
            count: 1,
            last,
        }
    }

    #[test]
    fn events_with_different_notes_are_different_series() {
        let ev = |note: &str| Event {
            type_: EventType::Normal,
            reason: "DeletedPod".into(),
            note: Some(note.into()),
            action: "Delete".into(),
            secondary: None,
        };
        let r = ObjectReference {
            name: Some("rc".into()),
            ..Default::default()
        };
        assert_eq!(
            Key::new(&ev("deleted pod a"), &r),
            Key::new(&ev("deleted pod a"), &r)
        );
        assert_ne!(
            Key::new(&ev("deleted pod a"), &r),
            Key::new(&ev("deleted pod b"), &r)
        );
    }

    #[test]
    fn entries_expire_after_the_series_ttl_unless_seen_again() {
        let t0 = Timestamp::from_second(1_000_000).unwrap_or_default();
        let mut c = Cache::default();
        c.observe(key("a"), published("a.1", t0));
        c.observe(key("b"), published("b.1", t0));
        // b is seen again a minute later: its first queue entry must not remove it.
        let t1 = t0 + SignedDuration::from_mins(1);
        c.observe(key("b"), published("b.1", t1));
        c.expire(t0 + SERIES_TTL);
        assert!(!c.entries.contains_key(&key("a")));
        assert!(c.entries.contains_key(&key("b")));
        c.expire(t1 + SERIES_TTL);
        assert!(c.entries.is_empty());
        assert!(c.order.is_empty());
    }

    #[test]
    fn the_cache_is_bounded_however_many_events_are_published() {
        let t0 = Timestamp::from_second(1_000_000).unwrap_or_default();
        let mut c = Cache::default();
        for i in 0..3 * MAX_CACHED {
            c.observe(key(&i.to_string()), published("x", t0));
            // The same key again and again must not grow the queue without bound either.
            c.observe(
                key("hot"),
                published("hot", t0 + SignedDuration::from_millis(i as i64)),
            );
            c.expire(t0);
        }
        assert!(c.entries.len() <= MAX_CACHED + 1, "{}", c.entries.len());
        assert!(c.order.len() <= 2 * MAX_CACHED + 1, "{}", c.order.len());
        // The newest entries are the ones kept.
        assert!(c.entries.contains_key(&key(&(3 * MAX_CACHED - 1).to_string())));
    }
}
