//! Which container images the process runtime can run, and with what: `rayproject/ray` (any tag,
//! `-gpu`/`-py3xx`/`-cpu`/`-cuda` variants included) is the pinned Ray of the runtime's venv. KubeRay's
//! autoscaler sidecar uses the same image but stays simulated: it needs a Kubernetes API with nodes,
//! which the embedded server does not serve.

use k8s_openapi::api::core::v1::Container;

/// What runs a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runs {
    /// The container's own command, as a process with the pinned Ray on PATH.
    Ray,
    /// The node agent's simulation (running until the pod is deleted).
    Simulated,
    /// quotagate's own image (`quotagate:TAG`, as `install-manifests` ships it): this machine's
    /// `quotagate` binary with the container's command and args, when the runtime was given one.
    Quotagate,
}

/// `quotagate:TAG` or `REGISTRY/.../quotagate:TAG`.
pub fn is_quotagate_image(image: &str) -> bool {
    let repo = repository(image);
    repo == "quotagate" || repo.ends_with("/quotagate")
}

/// The repository: without digest and tag.
fn repository(image: &str) -> &str {
    let without_digest = image.split('@').next().unwrap_or(image);
    match without_digest.rfind(':') {
        Some(i) if i > without_digest.rfind('/').unwrap_or(0) => &without_digest[..i],
        _ => without_digest,
    }
}

/// `rayproject/ray:TAG`, with or without a registry (`docker.io/`, `quay.io/`...) and digest.
pub fn is_ray_image(image: &str) -> bool {
    // The repository is everything before the tag's colon, which comes after the last slash.
    let repo = repository(image);
    repo == "rayproject/ray" || repo.ends_with("/rayproject/ray")
}

/// KubeRay's autoscaler sidecar: named `autoscaler`, or running `ray kuberay-autoscaler`.
fn is_autoscaler(c: &Container) -> bool {
    let words = c.command.iter().chain(c.args.iter()).flatten();
    c.name == "autoscaler" || words.into_iter().any(|w| w.contains("kuberay-autoscaler"))
}

pub fn runs(c: &Container) -> Runs {
    if c.image.as_deref().is_some_and(is_ray_image) && !is_autoscaler(c) {
        Runs::Ray
    } else if c.image.as_deref().is_some_and(is_quotagate_image) {
        Runs::Quotagate
    } else {
        Runs::Simulated
    }
}

/// A pod is the process runtime's when at least one of its containers runs as a process: a Ray one,
/// or a quotagate one when the runtime runs those (`quotagate`), a Ray one when it runs those (`ray`).
pub fn has_process(containers: &[Container], quotagate: bool, ray: bool) -> bool {
    containers
        .iter()
        .any(|c| (ray && runs(c) == Runs::Ray) || (quotagate && runs(c) == Runs::Quotagate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ray_images_and_the_autoscaler() {
        for yes in [
            "rayproject/ray:2.60.0",
            "rayproject/ray:2.60.0-gpu",
            "rayproject/ray:2.41.0-py311",
            "docker.io/rayproject/ray:latest",
            "rayproject/ray",
            "rayproject/ray:2.60.0@sha256:abc",
            "localhost:5000/rayproject/ray:nightly",
        ] {
            assert!(is_ray_image(yes), "{yes}");
        }
        for no in [
            "rayproject/ray-ml:2.9.0",
            "busybox",
            "myorg/rayproject/ray-custom:1",
            "python:3.11",
            "",
            "localhost:5000/ray:1",
        ] {
            assert!(!is_ray_image(no), "{no}");
        }
        let c = |name: &str, image: &str, args: &[&str]| Container {
            name: name.into(),
            image: Some(image.into()),
            args: Some(args.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        assert_eq!(
            runs(&c(
                "ray-head",
                "rayproject/ray:2.60.0",
                &["ray start --head --block"]
            )),
            Runs::Ray
        );
        assert_eq!(
            runs(&c("autoscaler", "rayproject/ray:2.60.0", &[])),
            Runs::Simulated
        );
        assert_eq!(
            runs(&c(
                "sidecar",
                "rayproject/ray:2.60.0",
                &["ray kuberay-autoscaler --cluster-name x"]
            )),
            Runs::Simulated
        );
        assert_eq!(runs(&c("app", "busybox", &["sleep 1"])), Runs::Simulated);
        assert!(has_process(
            &[
                c("a", "busybox", &[]),
                c("ray-worker", "rayproject/ray:2.60.0-gpu", &[])
            ],
            false,
            true
        ));
        assert!(!has_process(
            &[c("autoscaler", "rayproject/ray:2.60.0", &[])],
            false,
            true
        ));
        // `--runtime auto`: quotagate's image runs, Ray's stays simulated.
        assert!(!has_process(
            &[c("ray-head", "rayproject/ray:2.60.0", &[])],
            true,
            false
        ));
        let manager = c("manager", "registry.example/quotagate:0.1.0", &["run"]);
        assert_eq!(runs(&manager), Runs::Quotagate);
        assert!(!has_process(std::slice::from_ref(&manager), false, true));
        assert!(has_process(&[manager], true, false));
        assert!(!is_quotagate_image("quotagate-extras:1"));
    }
}
