//! Tasks that end with their owner. Dropping a `JoinHandle` detaches its task, so a manager whose
//! future is dropped (aborted by its caller, a crash, the end of a test or chaos run) would leave its
//! lease loop, cache watches and controllers running against the server forever. A `Tasks` aborts every
//! task it holds when it is dropped.

use std::ops::{Deref, DerefMut};

use tokio::task::JoinHandle;

#[derive(Debug, Default)]
pub struct Tasks(Vec<JoinHandle<()>>);

impl Tasks {
    /// Aborts every task and waits until each has ended.
    pub async fn shutdown(mut self) {
        let tasks = std::mem::take(&mut self.0);
        for t in &tasks {
            t.abort();
        }
        let _ = futures::future::join_all(tasks).await;
    }
}

impl From<Vec<JoinHandle<()>>> for Tasks {
    fn from(tasks: Vec<JoinHandle<()>>) -> Self {
        Tasks(tasks)
    }
}

// A plain `Vec` to everything that spawns into one (`&mut tasks` coerces to `&mut Vec<_>`).
impl Deref for Tasks {
    type Target = Vec<JoinHandle<()>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for Tasks {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// One task that ends with its owner; awaiting it awaits the task.
#[derive(Debug)]
pub struct AbortOnDrop<T>(pub JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    pub fn abort(&self) {
        self.0.abort();
    }
}

impl<T> Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
