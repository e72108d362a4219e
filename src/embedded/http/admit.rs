//! A write when admission webhooks are on (`webhooks.rs`): the object the write would store is
//! computed first (a dry run of the same request), the hooks are called with no lock held, and then
//! the admitted object is written as a create, or as an update conditional on the resourceVersion
//! the hooks saw. When something else changed the object meanwhile (409), the whole request is
//! run again, as kube-apiserver's `GuaranteedUpdate` retries its admission chain. A write no hook
//! matches is served as it came, after the dry run.

use super::super::webhooks;
use super::{Query, Req, Target};
use crate::embedded::error::ApiError;
use crate::embedded::managed_fields::Writer;
use crate::embedded::meta::meta_str;
use crate::embedded::patch::PatchKind;
use crate::embedded::store::Store;
use axum::response::Response;
use http::Method;
use serde_json::{Value, json};
use std::sync::Arc;

/// How often a write is retried when the object changes while its webhooks are called.
const ATTEMPTS: usize = 5;

impl Req<'_> {
    /// The object this POST, PUT or PATCH would store, the stored one it replaces, and whether it
    /// creates (a POST, or an apply of a missing object).
    fn would_store(&self) -> Result<(Value, Option<Arc<Value>>, bool), ApiError> {
        let info = &self.t.info;
        let name = self.t.name.clone().unwrap_or_default();
        match self.method {
            Method::POST => {
                let mut obj = super::events::to_storage(info, self.decode_body()?);
                super::refusals::type_meta(info, &obj)?;
                if info.group.is_empty() && info.plural == "pods" {
                    super::serviceaccount::admit_pod(
                        self.store(),
                        &self.srv.registry,
                        self.ns().unwrap_or("default"),
                        &mut obj,
                    )?;
                }
                let manager = self.manager();
                let created =
                    self.store()
                        .create_by(info, self.ns(), obj, true, Writer::new(&manager, false))?;
                Ok(((*created).clone(), None, true))
            }
            Method::PUT => {
                let old = self.store().get(info, self.ns(), &name)?;
                let obj = super::events::to_storage(info, self.decode_body()?);
                super::refusals::type_meta(info, &obj)?;
                let manager = self.manager();
                let w = Writer::new(&manager, self.t.status);
                let next = self.store().update_by(info, self.ns(), &name, obj, true, w)?;
                Ok(((*next).clone(), Some(old), false))
            }
            _ => {
                let kind = PatchKind::from_content_type(&self.content_type).ok_or_else(|| {
                    ApiError::unsupported_media(format!("unknown patch content type {:?}", self.content_type))
                })?;
                let old = self.store().get(info, self.ns(), &name).ok();
                let body = super::events::patch_to_storage(info, kind, self.decode_body()?);
                let manager = self.manager();
                let w = Writer {
                    force: self.query.flag("force"),
                    ..Writer::new(&manager, self.t.status)
                };
                let (obj, created) = self.store().patch(info, self.ns(), &name, kind, body, true, w)?;
                Ok(((*obj).clone(), if created { None } else { old }, created))
            }
        }
    }

    /// Serves a write through the matching admission webhooks.
    pub(super) async fn serve_with_webhooks(
        &self,
        user: &str,
        groups: &[String],
    ) -> Result<Response, ApiError> {
        let info = self.t.info.clone();
        for _ in 0..ATTEMPTS {
            let (new, old, create) = self.would_store()?;
            // Hooks see, and the rewritten request carries, the object in the requested version
            // (Events are stored under the core names: `events.rs`).
            let new = (*Store::at_version(&info, Arc::new(new))).clone();
            let old = old.map(|o| Store::at_version(&info, o));
            let call = webhooks::Call {
                info: &info,
                namespace: if info.namespaced {
                    Some(self.ns().unwrap_or("default"))
                } else {
                    None
                },
                subresource: self.t.status.then_some("status"),
                operation: if create { "CREATE" } else { "UPDATE" },
                old: old.as_deref(),
                user,
                groups,
                dry_run: self.query.dry_run(),
            };
            if !webhooks::any_match(self.store(), &self.srv.registry, &call, &new) {
                return self.serve();
            }
            let mut admitted = webhooks::admit(self.store(), &self.srv.registry, &call, new).await?;
            let meta = admitted.get_mut("metadata").and_then(Value::as_object_mut);
            let (method, name) = match (&old, meta) {
                (Some(old), Some(m)) => {
                    m.insert("resourceVersion".into(), json!(meta_str(old, "resourceVersion")));
                    (Method::PUT, self.t.name.clone())
                }
                (_, Some(m)) => {
                    m.remove("resourceVersion");
                    (Method::POST, None)
                }
                (_, None) => return Err(ApiError::bad_request("the admitted object has no metadata")),
            };
            let body = serde_json::to_vec(&admitted).map_err(|e| ApiError::internal(e.to_string()))?;
            let mut query = Query(self.query.0.clone());
            // The request's own body was checked in the dry run; the admitted object has only
            // fields the server or a hook put there.
            query.0.insert("fieldValidation".into(), "Ignore".into());
            let again = Req {
                srv: self.srv,
                t: Target {
                    info: info.clone(),
                    namespace: self.t.namespace.clone(),
                    name,
                    status: self.t.status,
                    scale: self.t.scale,
                },
                query,
                accept: self.accept.clone(),
                content_type: "application/json".into(),
                user_agent: self.user_agent.clone(),
                replay: true,
                in_process: self.in_process,
                body: &body,
                method: method.clone(),
            };
            match again.serve() {
                Err(e) if e.code == 409 && method == Method::PUT => continue,
                r => return r,
            }
        }
        let name = self.t.name.clone().unwrap_or_default();
        Err(ApiError::conflict(&info.qualified_plural(), &name).details(&name, &info.group, &info.plural))
    }
}
