//! KubeRay v1.7's feature gates (`ray-operator/pkg/features/features.go`): names, defaults, stages, and
//! what quotagate does with each, parsed from `--feature-gates` in Kubernetes' `Name=bool,...` form.
//! A gate quotagate cannot honour is refused at start-up (a gate whose feature it always runs cannot be
//! turned off; a scheduler it does not have cannot be turned on); an alpha field whose gate is on but
//! whose feature quotagate lacks is refused by validation saying so.

use super::validation::RayFeatureGates;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
}

/// What quotagate does with a gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Always behaves as with the gate on; turning it off is refused.
    AlwaysOn,
    /// Only changes what validation accepts: with the gate on, the field is refused as not implemented.
    NotImplemented,
    /// Implemented with the gate's own default, either value accepted (RayJobDeletionPolicy: off refuses
    /// `deletionStrategy` and worker-group `suspend`, and the RayJob controller ignores the strategy;
    /// SidecarSubmitterRestart: on, SidecarMode's submitter container restarts on failure;
    /// RayCronJob: on, the RayCronJob controller runs).
    Honoured,
    /// Turning it on is refused: quotagate has no such feature.
    RefusedOn,
}

pub struct Gate {
    pub name: &'static str,
    pub default: bool,
    pub stage: Stage,
    pub support: Support,
}

const fn gate(name: &'static str, default: bool, stage: Stage, support: Support) -> Gate {
    Gate {
        name,
        default,
        stage,
        support,
    }
}

/// KubeRay v1.7's gates, in its order.
pub const GATES: [Gate; 11] = [
    gate("RayClusterStatusConditions", true, Stage::Beta, Support::AlwaysOn),
    gate("RayJobDeletionPolicy", true, Stage::Beta, Support::Honoured),
    gate("RayMultiHostIndexing", true, Stage::Beta, Support::AlwaysOn),
    gate(
        "RayServiceIncrementalUpgrade",
        true,
        Stage::Beta,
        Support::AlwaysOn,
    ),
    gate("RayCronJob", false, Stage::Alpha, Support::Honoured),
    gate("SidecarSubmitterRestart", false, Stage::Alpha, Support::Honoured),
    gate(
        "RayClusterNetworkPolicy",
        false,
        Stage::Alpha,
        Support::NotImplemented,
    ),
    gate(
        "GCSFaultToleranceEmbeddedStorage",
        false,
        Stage::Alpha,
        Support::NotImplemented,
    ),
    gate("RayClusterMTLS", false, Stage::Alpha, Support::NotImplemented),
    gate(
        "RayClusterHistoryServer",
        false,
        Stage::Alpha,
        Support::NotImplemented,
    ),
    gate("KubernetesWAS", false, Stage::Alpha, Support::RefusedOn),
];

/// Parses `Name=true,Other=false` (Kubernetes' `--feature-gates` syntax; empty means all defaults).
pub fn parse(text: &str) -> Result<RayFeatureGates, String> {
    let mut gates = RayFeatureGates::default();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = item
            .split_once('=')
            .ok_or_else(|| format!("missing bool value for {item} (the form is Name=true or Name=false)"))?;
        let (name, value) = (name.trim(), value.trim());
        let on: bool = value.parse().map_err(|_| {
            format!(
                "invalid value of {name}={value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
            )
        })?;
        let g = GATES
            .iter()
            .find(|g| g.name == name)
            .ok_or_else(|| format!("unrecognized feature gate: {name}"))?;
        match (g.support, on) {
            (Support::AlwaysOn, false) => {
                return Err(format!(
                    "{name}=false is not implemented by quotagate: it always behaves as with {name}=true"
                ));
            }
            (Support::RefusedOn, true) => {
                return Err(format!(
                    "{name}=true is not implemented by quotagate (it has no such batch scheduler)"
                ));
            }
            _ => {}
        }
        match name {
            "RayClusterHistoryServer" => gates.history_server = on,
            "RayClusterNetworkPolicy" => gates.network_policy = on,
            "RayClusterMTLS" => gates.mtls = on,
            "GCSFaultToleranceEmbeddedStorage" => gates.embedded_gcs_storage = on,
            "RayJobDeletionPolicy" => gates.job_deletion_policy = on,
            "SidecarSubmitterRestart" => gates.sidecar_submitter_restart = on,
            "RayCronJob" => gates.ray_cron_job = on,
            _ => {}
        }
    }
    Ok(gates)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// KubeRay `features.go` `defaultFeatureGates`: every alpha gate is off, every beta gate on.
    #[test]
    fn defaults_follow_the_stage() {
        for g in &GATES {
            assert_eq!(g.default, g.stage == Stage::Beta, "{}", g.name);
        }
        assert_eq!(parse("").unwrap(), RayFeatureGates::default());
    }

    #[test]
    fn parses_kubernetes_syntax_and_refuses_what_quotagate_cannot_honour() {
        let g = parse("RayClusterMTLS=true, RayClusterHistoryServer=true,RayCronJob=true").unwrap();
        assert!(g.mtls && g.history_server && !g.network_policy && !g.sidecar_submitter_restart);
        assert!(
            parse("SidecarSubmitterRestart=true")
                .unwrap()
                .sidecar_submitter_restart
        );
        assert!(
            g.ray_cron_job && !parse("").unwrap().ray_cron_job,
            "RayCronJob: alpha, off unless asked for"
        );
        assert!(parse("RayServiceIncrementalUpgrade=true").is_ok());
        let err = |s: &str| parse(s).unwrap_err();
        assert_eq!(err("Nope=true"), "unrecognized feature gate: Nope");
        assert!(err("RayClusterMTLS").contains("missing bool value"));
        assert!(err("RayClusterMTLS=yes").contains("invalid value of RayClusterMTLS=yes"));
        assert!(err("RayServiceIncrementalUpgrade=false").contains("not implemented by quotagate"));
        assert!(err("KubernetesWAS=true").contains("not implemented by quotagate"));
    }
}
