//! `RayDashboard` over HTTP/1.1 against a real Ray head (`http://<host>:<dashboard port>`).
//!
//! Timeouts are short on purpose (KubeRay uses 2 s): the controller requeues and retries, and a
//! stuck head must not hold a reconcile.

use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::BoxFuture;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use super::error::{DashboardError, shorten};
use super::jobs::{self, JobDetails, JobSubmitRequest, JobSubmitResponse};
use super::{DashboardEndpoint, RayDashboard, ServeConfig, ServeDetails};

/// Path of the Serve multi-application REST API; the trailing slash is what Ray registers.
pub const SERVE_APPLICATIONS_PATH: &str = "/api/serve/applications/";
/// KubeRay reads only the apps deployed through this API (not `serve.run` ones).
pub const SERVE_DETAILS_QUERY: &str = "api_type=declarative";
/// Header Ray's token auth reads (KubeRay sends this one; `Authorization` also works).
pub const AUTH_HEADER: &str = "x-ray-authorization";

#[derive(Clone, Debug)]
pub struct HttpDashboardOptions {
    pub connect_timeout: Duration,
    /// Whole request: connect, send, read the body.
    pub request_timeout: Duration,
    /// Larger bodies are refused; a real status with many apps is far below this.
    pub max_body_bytes: usize,
}

impl Default for HttpDashboardOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            max_body_bytes: 16 * 1024 * 1024,
        }
    }
}

/// One client (one connection pool) for every cluster's dashboard.
#[derive(Clone)]
pub struct HttpDashboard {
    client: Client<HttpConnector, Full<Bytes>>,
    options: HttpDashboardOptions,
    /// `--use-kubernetes-proxy`: every call goes through this API server's `services/proxy`
    /// (`kube_proxy.rs`) instead of to the head Service's cluster address.
    api_server: Option<kube::Client>,
}

impl HttpDashboard {
    pub fn new(options: HttpDashboardOptions) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(options.connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Self {
            client,
            options,
            api_server: None,
        }
    }

    /// A client that reaches every dashboard through `api`'s service proxy, as KubeRay's operator
    /// does with `--use-kubernetes-proxy` (for a manager outside the cluster network).
    pub fn through_api_server(api: kube::Client, options: HttpDashboardOptions) -> Self {
        Self {
            api_server: Some(api),
            ..Self::new(options)
        }
    }

    /// Sends one request and returns the status and body, classifying transport failures.
    async fn send(
        &self,
        endpoint: &DashboardEndpoint,
        method: Method,
        path_and_query: &str,
        json_body: Option<Vec<u8>>,
    ) -> Result<(StatusCode, Bytes), DashboardError> {
        if let Some(api) = &self.api_server {
            let path = super::kube_proxy::proxy_path(&endpoint.base_url, path_and_query)?;
            let headers: Vec<(&str, String)> = endpoint
                .auth_token
                .iter()
                .map(|t| (AUTH_HEADER, format!("Bearer {t}")))
                .collect();
            let limits = super::kube_proxy::Limits {
                request_timeout: self.options.request_timeout,
                max_body_bytes: self.options.max_body_bytes,
            };
            return super::kube_proxy::send(api, limits, method, path, &headers, json_body).await;
        }
        let url = format!("{}{}", endpoint.base_url, path_and_query);
        let uri: Uri = url
            .parse()
            .map_err(|e| DashboardError::InvalidEndpoint(format!("{url:?} is not a valid URL: {e}")))?;
        if uri.scheme_str() != Some("http") {
            return Err(DashboardError::InvalidEndpoint(format!(
                "{url:?}: only http:// is supported"
            )));
        }
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(token) = &endpoint.auth_token {
            builder = builder.header(AUTH_HEADER, format!("Bearer {token}"));
        }
        let body = match json_body {
            Some(bytes) => {
                builder = builder.header(header::CONTENT_TYPE, "application/json");
                Full::new(Bytes::from(bytes))
            }
            None => Full::new(Bytes::new()),
        };
        // Only the header values can fail here, and only the token is caller-provided.
        let request = builder.body(body).map_err(|_| {
            DashboardError::InvalidEndpoint(
                "auth token contains characters not allowed in an HTTP header".into(),
            )
        })?;

        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| classify(&url, &e))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), self.options.max_body_bytes)
                .collect()
                .await
                .map_err(|e| DashboardError::Transport {
                    url: url.clone(),
                    reason: error_chain(e.as_ref()),
                })?
                .to_bytes();
            Ok((status, body))
        };
        match tokio::time::timeout(self.options.request_timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(DashboardError::Timeout {
                url,
                after: self.options.request_timeout,
            }),
        }
    }
}

impl Default for HttpDashboard {
    fn default() -> Self {
        Self::new(HttpDashboardOptions::default())
    }
}

fn classify(url: &str, e: &hyper_util::client::legacy::Error) -> DashboardError {
    let reason = error_chain(e);
    if e.is_connect() {
        DashboardError::Unreachable {
            url: url.to_owned(),
            reason,
        }
    } else {
        DashboardError::Transport {
            url: url.to_owned(),
            reason,
        }
    }
}

/// "outer: inner: root cause", since hyper's top-level messages alone say little.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p == &text) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

fn check_status(status: StatusCode, body: &[u8]) -> Result<(), DashboardError> {
    if status.is_success() {
        Ok(())
    } else {
        Err(DashboardError::from_status(status.as_u16(), body))
    }
}

/// Decodes a GET body; separate so it is testable without a server.
pub fn decode_serve_details(body: &[u8]) -> Result<ServeDetails, DashboardError> {
    serde_json::from_slice(body).map_err(|e| DashboardError::Decode {
        reason: e.to_string(),
        body: shorten(&String::from_utf8_lossy(body)),
    })
}

impl RayDashboard for HttpDashboard {
    fn deploy<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        config: &'a ServeConfig,
        target_capacity: Option<f64>,
    ) -> BoxFuture<'a, Result<(), DashboardError>> {
        async move {
            let body = config.with_target_capacity(target_capacity)?.to_body();
            let (status, resp) = self
                .send(endpoint, Method::PUT, SERVE_APPLICATIONS_PATH, Some(body))
                .await?;
            check_status(status, &resp)
        }
        .boxed()
    }

    fn serve_details<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
    ) -> BoxFuture<'a, Result<ServeDetails, DashboardError>> {
        async move {
            let path = format!("{SERVE_APPLICATIONS_PATH}?{SERVE_DETAILS_QUERY}");
            let (status, body) = self.send(endpoint, Method::GET, &path, None).await?;
            check_status(status, &body)?;
            decode_serve_details(&body)
        }
        .boxed()
    }

    fn delete_applications<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
    ) -> BoxFuture<'a, Result<(), DashboardError>> {
        async move {
            let (status, body) = self
                .send(endpoint, Method::DELETE, SERVE_APPLICATIONS_PATH, None)
                .await?;
            check_status(status, &body)
        }
        .boxed()
    }

    fn proxy_healthy<'a>(
        &'a self,
        dashboard: &'a DashboardEndpoint,
        proxy_url: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        async move {
            // The proxy's health route needs no token (KubeRay's proxy client sends none).
            let mut proxy = DashboardEndpoint::new(proxy_url);
            if self.api_server.is_some() {
                // Through the API server, the head pod's Serve proxy is the cluster's head
                // Service on the proxy's port (the pod's address is not reachable from here).
                proxy = super::kube_proxy::serve_proxy_endpoint(&dashboard.base_url, proxy_url)?;
            }
            let path = crate::api::ray::constants::SERVE_PROXY_HEALTH_PATH;
            let (status, _) = self.send(&proxy, Method::GET, path, None).await?;
            Ok(status.is_success())
        }
        .boxed()
    }
}

impl super::jobs::RayJobsApi for HttpDashboard {
    fn submit_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        request: &'a JobSubmitRequest,
    ) -> BoxFuture<'a, Result<JobSubmitResponse, DashboardError>> {
        async move {
            let body =
                serde_json::to_vec(request).map_err(|e| DashboardError::InvalidConfig(e.to_string()))?;
            let (status, resp) = self
                .send(endpoint, Method::POST, jobs::JOBS_PATH, Some(body))
                .await?;
            check_status(status, &resp)?;
            jobs::decode(&resp)
        }
        .boxed()
    }

    fn job_info<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<JobDetails>, DashboardError>> {
        async move {
            let (status, body) = self
                .send(endpoint, Method::GET, &jobs::job_path(submission_id, ""), None)
                .await?;
            if status == StatusCode::NOT_FOUND {
                return Ok(None);
            }
            check_status(status, &body)?;
            jobs::decode(&body).map(Some)
        }
        .boxed()
    }

    fn stop_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        async move {
            let path = jobs::job_path(submission_id, "/stop");
            let (status, body) = self.send(endpoint, Method::POST, &path, None).await?;
            check_status(status, &body)?;
            Ok(jobs::decode::<jobs::StopResponse>(&body)?.stopped)
        }
        .boxed()
    }

    fn delete_job<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<bool, DashboardError>> {
        async move {
            let (status, body) = self
                .send(endpoint, Method::DELETE, &jobs::job_path(submission_id, ""), None)
                .await?;
            check_status(status, &body)?;
            Ok(jobs::decode::<jobs::DeleteResponse>(&body)?.deleted)
        }
        .boxed()
    }

    fn job_logs<'a>(
        &'a self,
        endpoint: &'a DashboardEndpoint,
        submission_id: &'a str,
    ) -> BoxFuture<'a, Result<String, DashboardError>> {
        async move {
            let path = jobs::job_path(submission_id, "/logs");
            let (status, body) = self.send(endpoint, Method::GET, &path, None).await?;
            check_status(status, &body)?;
            Ok(jobs::decode::<jobs::LogsResponse>(&body)?.logs)
        }
        .boxed()
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
