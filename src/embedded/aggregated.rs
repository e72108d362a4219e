//! API groups served by someone else, as a real API server proxies an `APIService`: a component
//! mounts a router for `/apis/<group>/...` and the embedded server hands it every request under that
//! prefix (after the listener's authentication). Keeps `embedded` independent of what it serves: the
//! manager mounts the visibility and explain groups at start.

use std::sync::{Arc, PoisonError, RwLock};

use axum::extract::{Request, State};
use axum::response::Response;
use tower::ServiceExt;

use super::EmbeddedServer;

#[derive(Default)]
pub struct Aggregated {
    groups: RwLock<Vec<(String, axum::Router)>>,
}

impl Aggregated {
    /// Serves `/apis/<group>/...` with `router` (which sees the full path); mounting a group again
    /// replaces its router.
    pub fn mount(&self, group: &str, router: axum::Router) {
        let mut g = self.groups.write().unwrap_or_else(PoisonError::into_inner);
        g.retain(|(name, _)| name != group);
        g.push((group.to_string(), router));
    }

    /// The router mounted for the group `path` is under, if any.
    fn find(&self, path: &str) -> Option<axum::Router> {
        let group = path.strip_prefix("/apis/")?.split('/').next()?;
        let g = self.groups.read().unwrap_or_else(PoisonError::into_inner);
        g.iter().find(|(name, _)| name == group).map(|(_, r)| r.clone())
    }

    /// Mounted group names.
    pub fn groups(&self) -> Vec<String> {
        self.groups
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// The server's entry point: a mounted group's router, else the API server itself.
pub async fn dispatch(State(srv): State<Arc<EmbeddedServer>>, req: Request) -> Response {
    if let Some(router) = srv.aggregated.find(req.uri().path()) {
        return match router.oneshot(req).await {
            Ok(r) => r,
            Err(e) => match e {},
        };
    }
    super::http::handle(State(srv), req).await
}
