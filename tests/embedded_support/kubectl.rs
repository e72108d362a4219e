//! The real kubectl against an embedded server on loopback TCP.
//! kubectl comes from env QUOTAGATE_KUBECTL or .venv-kubectl/bin/kubectl (scripts/install-kubectl.sh).
//! Missing kubectl: the tests print a skip line, or fail when QUOTAGATE_REQUIRE_TOOLS=1.

use super::server;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

pub fn kubectl_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("QUOTAGATE_KUBECTL") {
        return Some(PathBuf::from(p));
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-kubectl/bin/kubectl");
    p.exists().then_some(p)
}

pub struct Kube {
    pub bin: PathBuf,
    pub dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub addr: std::net::SocketAddr,
    pub srv: Arc<quotagate::embedded::EmbeddedServer>,
    pub cancel: CancellationToken,
}

impl Drop for Kube {
    fn drop(&mut self) {
        self.cancel.cancel();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kube {
    /// None (after printing the skip line) when kubectl is not installed and not required.
    pub async fn start(test: &str) -> Option<Kube> {
        Self::start_on(test, server()).await
    }

    /// As [`Kube::start`], serving `srv`.
    pub async fn start_on(test: &str, srv: Arc<quotagate::embedded::EmbeddedServer>) -> Option<Kube> {
        let Some(bin) = kubectl_path() else {
            if std::env::var("QUOTAGATE_REQUIRE_TOOLS").as_deref() == Ok("1") {
                panic!("kubectl not installed and QUOTAGATE_REQUIRE_TOOLS=1: run scripts/install-kubectl.sh");
            }
            println!("skipped: kubectl not installed, run scripts/install-kubectl.sh");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("quotagate-kubectl-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        let cancel = CancellationToken::new();
        let (addr, _) = srv
            .spawn_tcp("127.0.0.1:0".parse().unwrap(), Some(&kubeconfig), cancel.clone())
            .await
            .unwrap();
        Some(Kube {
            bin,
            dir,
            kubeconfig,
            addr,
            srv,
            cancel,
        })
    }

    pub async fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Out {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.dir.join("cache"))
            .env("HOME", &self.dir)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        if let Some(input) = stdin {
            let mut s = child.stdin.take().unwrap();
            s.write_all(input.as_bytes()).await.unwrap();
        }
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in 60s"))
            .unwrap();
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into(),
            stderr: String::from_utf8_lossy(&out.stderr).into(),
        }
    }

    pub async fn ok(&self, args: &[&str]) -> String {
        let o = self.run_with(args, None).await;
        assert!(o.ok, "kubectl {args:?} failed:\n{}\n{}", o.stdout, o.stderr);
        o.stdout
    }

    /// Runs kubectl expecting it to fail with `want` in its stderr; returns the stderr.
    pub async fn refused(&self, args: &[&str], stdin: Option<&str>, want: &str) -> String {
        let o = self.run_with(args, stdin).await;
        assert!(
            !o.ok && o.stderr.contains(want),
            "kubectl {args:?} must fail saying {want:?}:\n{}\n{}",
            o.stdout,
            o.stderr
        );
        o.stderr
    }

    pub async fn apply(&self, yaml: &str) -> String {
        let o = self.run_with(&["apply", "-f", "-"], Some(yaml)).await;
        assert!(o.ok, "kubectl apply failed:\n{}\n{}", o.stdout, o.stderr);
        o.stdout
    }
}
