//! KubeRay's observable contract: label and annotation keys, condition types and reasons, ports, limits.
//! Names and values follow KubeRay v1.7 (`utils/constant.go`, `raycluster_types.go`, `rayservice_types.go`)
//! because Kueue, dashboards and user tooling key on them.

/// The API group of RayCluster and RayService.
pub const RAY_GROUP: &str = "ray.io";

// Labels.
pub const LABEL_CLUSTER: &str = "ray.io/cluster";
pub const LABEL_NODE_TYPE: &str = "ray.io/node-type";
pub const LABEL_GROUP: &str = "ray.io/group";
pub const LABEL_IS_RAY_NODE: &str = "ray.io/is-ray-node";
pub const LABEL_IDENTIFIER: &str = "ray.io/identifier";
pub const LABEL_SERVE: &str = "ray.io/serve";
pub const LABEL_HEADLESS_WORKER_SVC: &str = "ray.io/headless-worker-svc";
pub const LABEL_ORIGINATED_FROM_CR_NAME: &str = "ray.io/originated-from-cr-name";
pub const LABEL_ORIGINATED_FROM_CRD: &str = "ray.io/originated-from-crd";
pub const LABEL_WORKER_REPLICA_NAME: &str = "ray.io/worker-group-replica-name";
pub const LABEL_WORKER_REPLICA_INDEX: &str = "ray.io/worker-group-replica-index";
pub const LABEL_REPLICA_HOST_INDEX: &str = "ray.io/replica-host-index";
pub const LABEL_APP_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_CREATED_BY: &str = "app.kubernetes.io/created-by";
pub const LABEL_PRIORITY_CLASS_NAME: &str = "ray.io/priority-class-name";
pub const LABEL_GANG_SCHEDULING_ENABLED: &str = "ray.io/gang-scheduling-enabled";

// Label values.
pub const APPLICATION_NAME: &str = "kuberay";
pub const COMPONENT_NAME: &str = "kuberay-operator";
pub const NODE_TYPE_HEAD: &str = "head";
pub const NODE_TYPE_WORKER: &str = "worker";
pub const NODE_TYPE_REDIS_CLEANUP: &str = "redis-cleanup";
pub const HEAD_GROUP_NAME: &str = "headgroup";
pub const IS_RAY_NODE_YES: &str = "yes";
pub const CRD_RAY_CLUSTER: &str = "RayCluster";
pub const CRD_RAY_SERVICE: &str = "RayService";
pub const CRD_RAY_JOB: &str = "RayJob";

// Annotations.
pub const ANNOTATION_HASH_WITHOUT_REPLICAS: &str = "ray.io/hash-without-replicas-and-workers-to-delete";
pub const ANNOTATION_UPGRADE_STRATEGY_RECREATE_HASH: &str = "ray.io/upgrade-strategy-recreate-hash";
pub const ANNOTATION_NUM_WORKER_GROUPS: &str = "ray.io/num-worker-groups";
pub const ANNOTATION_KUBERAY_VERSION: &str = "ray.io/kuberay-version";
pub const ANNOTATION_INITIALIZING_TIMEOUT: &str = "ray.io/initializing-timeout";
pub const ANNOTATION_ENABLE_SERVE_SERVICE: &str = "ray.io/enable-serve-service";
pub const ANNOTATION_OVERWRITE_CONTAINER_CMD: &str = "ray.io/overwrite-container-cmd";
pub const ANNOTATION_FT_ENABLED: &str = "ray.io/ft-enabled";
pub const ANNOTATION_EXTERNAL_STORAGE_NAMESPACE: &str = "ray.io/external-storage-namespace";
pub const ANNOTATION_GCS_FT_DELETION_TIMEOUT: &str = "ray.io/gcs-ft-deletion-timeout";
pub const ANNOTATION_DISABLE_PROVISIONED_HEAD_RESTART: &str = "ray.io/disable-provisioned-head-restart";

/// Version we stamp in `ray.io/kuberay-version`; KubeRay re-stamps hashes when it changes.
pub const KUBERAY_COMPAT_VERSION: &str = "v1.7.0";

// Finalizers.
pub const FINALIZER_RAYSERVICE: &str = "ray.io/rayservice-finalizer";
pub const FINALIZER_GCS_FT_REDIS_CLEANUP: &str = "ray.io/gcs-ft-redis-cleanup-finalizer";

// managedBy values.
pub const MANAGED_BY_KUBERAY: &str = "ray.io/kuberay-operator";
pub const MANAGED_BY_MULTIKUEUE: &str = "kueue.x-k8s.io/multikueue";

// RayCluster condition types and reasons.
pub const COND_HEAD_POD_READY: &str = "HeadPodReady";
pub const COND_RAY_CLUSTER_PROVISIONED: &str = "RayClusterProvisioned";
pub const COND_REPLICA_FAILURE: &str = "ReplicaFailure";
pub const COND_RAY_CLUSTER_SUSPENDING: &str = "RayClusterSuspending";
pub const COND_RAY_CLUSTER_SUSPENDED: &str = "RayClusterSuspended";
pub const REASON_ALL_POD_RUNNING_AND_READY_FIRST_TIME: &str = "AllPodRunningAndReadyFirstTime";
pub const REASON_RAY_CLUSTER_PODS_PROVISIONING: &str = "RayClusterPodsProvisioning";
pub const REASON_HEAD_POD_NOT_FOUND: &str = "HeadPodNotFound";
pub const REASON_HEAD_POD_RUNNING_AND_READY: &str = "HeadPodRunningAndReady";
pub const REASON_UNKNOWN: &str = "Unknown";
pub const REASON_FAILED_CREATE_HEAD_POD: &str = "FailedCreateHeadPod";
/// KubeRay's event reason when the head template names a ServiceAccount that does not exist (with the
/// in-tree autoscaler).
pub const REASON_AUTOSCALER_SA_NOT_FOUND: &str = "AutoscalerServiceAccountNotFound";
pub const REASON_FAILED_DELETE_HEAD_POD: &str = "FailedDeleteHeadPod";
pub const REASON_FAILED_CREATE_WORKER_POD: &str = "FailedCreateWorkerPod";
pub const REASON_FAILED_DELETE_WORKER_POD: &str = "FailedDeleteWorkerPod";
pub const REASON_FAILED_DELETE_ALL_PODS: &str = "FailedDeleteAllPods";

// RayService condition types and reasons.
pub const COND_READY: &str = "Ready";
pub const COND_UPGRADE_IN_PROGRESS: &str = "UpgradeInProgress";
pub const COND_ROLLBACK_IN_PROGRESS: &str = "RollbackInProgress";
pub const COND_SUSPENDING: &str = "Suspending";
pub const COND_SUSPENDED: &str = "Suspended";
pub const REASON_INITIALIZING: &str = "Initializing";
pub const REASON_INITIALIZING_TIMEOUT: &str = "InitializingTimeout";
pub const REASON_ZERO_SERVE_ENDPOINTS: &str = "ZeroServeEndpoints";
pub const REASON_NON_ZERO_SERVE_ENDPOINTS: &str = "NonZeroServeEndpoints";
pub const REASON_BOTH_ACTIVE_PENDING_CLUSTERS_EXIST: &str = "BothActivePendingClustersExist";
pub const REASON_NO_PENDING_CLUSTER: &str = "NoPendingCluster";
pub const REASON_NO_ACTIVE_CLUSTER: &str = "NoActiveCluster";
pub const REASON_VALIDATION_FAILED: &str = "ValidationFailed";
pub const REASON_DESIRED_CLUSTER_SPEC_CHANGED: &str = "DesiredClusterSpecChanged";
pub const REASON_SUSPEND_REQUESTED: &str = "SuspendRequested";
pub const REASON_SUSPEND_IN_PROGRESS: &str = "SuspendInProgress";
pub const REASON_SUSPEND_COMPLETE: &str = "SuspendComplete";
pub const REASON_RAY_SERVICE_RESUMED: &str = "RayServiceResumed";

/// Serve application statuses (Serve's `ApplicationStatus`).
pub mod app_status {
    pub const NOT_STARTED: &str = "NOT_STARTED";
    pub const DEPLOYING: &str = "DEPLOYING";
    pub const RUNNING: &str = "RUNNING";
    pub const DEPLOY_FAILED: &str = "DEPLOY_FAILED";
    pub const DELETING: &str = "DELETING";
    pub const UNHEALTHY: &str = "UNHEALTHY";
}

/// Serve deployment statuses as KubeRay names them.
pub mod deployment_status {
    pub const UPDATING: &str = "UPDATING";
    pub const HEALTHY: &str = "HEALTHY";
    pub const UNHEALTHY: &str = "UNHEALTHY";
}

/// Serve app name used when Serve reports an empty one.
pub const DEFAULT_SERVE_APP_NAME: &str = "default";

// Ports and port names.
pub const DEFAULT_CLIENT_PORT: i32 = 10001;
pub const DEFAULT_GCS_SERVER_PORT: i32 = 6379;
pub const DEFAULT_DASHBOARD_PORT: i32 = 8265;
pub const DEFAULT_METRICS_PORT: i32 = 8080;
pub const DEFAULT_DASHBOARD_AGENT_LISTEN_PORT: i32 = 52365;
pub const DEFAULT_SERVING_PORT: i32 = 8000;
pub const DEFAULT_GATEWAY_LISTENER_PORT: i32 = 80;
pub const CLIENT_PORT_NAME: &str = "client";
pub const GCS_SERVER_PORT_NAME: &str = "gcs-server";
pub const DASHBOARD_PORT_NAME: &str = "dashboard";
pub const METRICS_PORT_NAME: &str = "metrics";
pub const SERVING_PORT_NAME: &str = "serve";
pub const GATEWAY_LISTENER_PORT_NAME: &str = "http";
pub const DEFAULT_SERVICE_APP_PROTOCOL: &str = "tcp";
pub const SERVE_PROXY_HEALTH_PATH: &str = "/-/healthz";

// Names.
pub const HEAD_SERVICE_SUFFIX: &str = "head-svc";
pub const SERVE_SERVICE_SUFFIX: &str = "serve-svc";
pub const HEADLESS_SERVICE_SUFFIX: &str = "headless";
pub const GATEWAY_SUFFIX: &str = "gateway";
pub const HTTPROUTE_SUFFIX: &str = "httproute";

// Limits: 53 = 63 - len("-serve-svc"); RayService/RayJob leave 6 chars for the "-xxxxx" cluster suffix.
pub const MAX_RAY_CLUSTER_NAME_LENGTH: usize = 53;
pub const MAX_RAY_SERVICE_NAME_LENGTH: usize = 47;
pub const MAX_RAY_JOB_NAME_LENGTH: usize = 47;
/// Leaves room for the `-<unix minute>` (up to 11 characters) of the RayJobs a RayCronJob creates.
pub const MAX_RAY_CRON_JOB_NAME_LENGTH: usize = MAX_RAY_JOB_NAME_LENGTH - 11;

// RayCronJob: what it writes on the RayJobs it creates, and its event reasons.
pub const LABEL_CRON_JOB_NAME: &str = "ray.io/cronjob-name";
pub const ANNOTATION_CRON_JOB_SCHEDULED_TIMESTAMP: &str = "ray.io/cronjob-scheduled-timestamp";
pub const CRD_RAY_CRON_JOB: &str = "RayCronJob";
pub const EVENT_INVALID_RAY_CRON_JOB_SPEC: &str = "InvalidRayCronJobSpec";
pub const EVENT_SUSPENDED_RAY_CRON_JOB: &str = "SuspendedRayCronJob";

// Timings (seconds).
pub const DEFAULT_RAY_CLUSTER_DELETION_DELAY_SECONDS: i32 = 60;
pub const RAY_SERVICE_REQUEUE_SECONDS: u64 = 2;
pub const RAY_CLUSTER_DEFAULT_REQUEUE_SECONDS: u64 = 300;
pub const GCS_FT_DELETION_TIMEOUT_DEFAULT_SECONDS: u64 = 300;

// Container environment variables injected into Ray Pods.
pub const ENV_RAY_CLUSTER_NAME: &str = "RAY_CLUSTER_NAME";
pub const ENV_RAY_CLUSTER_NAMESPACE: &str = "RAY_CLUSTER_NAMESPACE";
pub const ENV_RAY_IP: &str = "RAY_IP";
pub const ENV_FQ_RAY_IP: &str = "FQ_RAY_IP";
pub const ENV_RAY_PORT: &str = "RAY_PORT";
pub const ENV_RAY_ADDRESS: &str = "RAY_ADDRESS";
pub const ENV_RAY_REDIS_ADDRESS: &str = "RAY_REDIS_ADDRESS";
pub const ENV_REDIS_PASSWORD: &str = "REDIS_PASSWORD";
pub const ENV_REDIS_USERNAME: &str = "REDIS_USERNAME";
pub const ENV_RAY_EXTERNAL_STORAGE_NS: &str = "RAY_external_storage_namespace";
pub const ENV_RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S: &str = "RAY_gcs_rpc_server_reconnect_timeout_s";
pub const ENV_RAY_USAGE_STATS_KUBERAY_IN_USE: &str = "RAY_USAGE_STATS_KUBERAY_IN_USE";
pub const ENV_RAY_USAGE_STATS_EXTRA_TAGS: &str = "RAY_USAGE_STATS_EXTRA_TAGS";
pub const ENV_KUBERAY_GEN_RAY_START_CMD: &str = "KUBERAY_GEN_RAY_START_CMD";
pub const ENV_RAY_START_ULIMIT_OPEN_FILES: &str = "RAY_START_ULIMIT_OPEN_FILES";
pub const ENV_RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE: &str = "RAY_DASHBOARD_ENABLE_K8S_DISK_USAGE";
pub const ENV_RAY_CLOUD_INSTANCE_ID: &str = "RAY_CLOUD_INSTANCE_ID";
pub const ENV_RAY_NODE_TYPE_NAME: &str = "RAY_NODE_TYPE_NAME";
pub const ENV_RAY_ENABLE_AUTOSCALER_V2: &str = "RAY_enable_autoscaler_v2";
pub const ENV_RAY_AUTH_MODE: &str = "RAY_AUTH_MODE";
pub const ENV_RAY_AUTH_TOKEN: &str = "RAY_AUTH_TOKEN";
pub const DEFAULT_WORKER_GCS_RECONNECT_TIMEOUT_S: &str = "600";

// ---------------------------------------------------------------------------------------------------------
// quotagate extensions: not KubeRay's. Bookkeeping that KubeRay keeps in memory (or does not have) and that
// we persist on objects so a restart or a second replica decides the same way.
// ---------------------------------------------------------------------------------------------------------

/// On a RayCluster: while `"true"` the RayCluster controller creates no pods (the quota admission gate).
pub const ANNOTATION_ADMISSION_GATED: &str = "quotagate.io/admission-gated";
/// On a child RayCluster: when the RayService controller made it, RFC 3339 to the nanosecond
/// (`creationTimestamp` has whole seconds). Orders the gate's coverage among children made within one
/// second; admission refuses changing it.
pub const ANNOTATION_CREATED_AT: &str = "quotagate.io/created-at";
/// On a RayService: durable deletion deadlines of its dangling clusters.
pub const ANNOTATION_CLUSTER_DELETION_DEADLINES: &str = "quotagate.io/cluster-deletion-deadlines";
/// On a child RayCluster: hash of the Serve config its dashboard last accepted (a restart does not re-push).
pub const ANNOTATION_SERVED_CONFIG_HASH: &str = "quotagate.io/served-config-hash";
/// On a child RayCluster: `"<config hash> <Ray's message>"` when Ray refused that config (HTTP 400).
pub const ANNOTATION_REJECTED_SERVE_CONFIG: &str = "quotagate.io/rejected-serve-config";
/// On a RayService: how long an upgrade's pending cluster may run (from the moment quota admits it)
/// without taking the traffic; past it the pending cluster is dropped and its growth released. A Go
/// duration or whole seconds, as `ray.io/initializing-timeout`; overrides the manager's
/// `--upgrade-deadline`. Off unless one of them is set (KubeRay has no such bound).
pub const ANNOTATION_UPGRADE_DEADLINE: &str = "quotagate.io/upgrade-deadline";
/// On a RayService: the cluster-spec hash of an upgrade dropped at its deadline. That spec is not tried
/// again until it changes, or until this annotation is removed.
pub const ANNOTATION_FAILED_UPGRADE: &str = "quotagate.io/failed-upgrade";
/// On a RayService with `NewClusterWithIncrementalUpgrade`:
/// `<namespace>/<name>[/<sectionName>][:<port>]` of an existing, shared Gateway its HTTPRoute
/// attaches to; no `<rs>-gateway` is created (ahead of KubeRay PR #5018's
/// `clusterUpgradeOptions.gatewayRef`, its `port` included).
pub const ANNOTATION_GATEWAY_REF: &str = "quotagate.io/gateway-ref";
/// On a RayService with `NewClusterWithIncrementalUpgrade`: the name of an existing HTTPRoute in its
/// namespace whose `spec.rules[0].backendRefs` carry the upgrade's weights; the route is never created,
/// owned or deleted, and its Gateway is its parentRef (ahead of KubeRay issue #4956's `httpRouteName`).
pub const ANNOTATION_HTTP_ROUTE_NAME: &str = "quotagate.io/http-route-name";
/// RayService Warning event reason: an upgrade's pending cluster passed its deadline and was dropped.
pub const REASON_UPGRADE_DEADLINE_EXCEEDED: &str = "UpgradeDeadlineExceeded";
/// RayService `Ready=False` reason: something serves but a Serve application failed to deploy.
pub const REASON_SERVE_DEPLOY_FAILED: &str = "ServeDeployFailed";

/// Key of the token in the operator-managed auth Secret (KubeRay's `RAY_AUTH_TOKEN_SECRET_KEY`).
pub const AUTH_TOKEN_KEY: &str = "auth_token";

/// quotagate's condition on a RayService's child RayCluster: its pods wait for an admitted workload slice.
pub const COND_QUOTA_GATED: &str = "QuotaGated";
pub const REASON_WAITING_FOR_WORKLOAD_SLICE: &str = "WaitingForWorkloadSlice";
pub const REASON_WORKLOAD_SLICE_ADMITTED: &str = "WorkloadSliceAdmitted";
/// quotagate's answer to kuberay#4846 (not yet settled in KubeRay, hence the prefix): True on a
/// queue-managed RayCluster while some of its pods (a worker group's scale-up) wait for a workload
/// slice Kueue has found no quota for, False otherwise.
pub const COND_QUOTA_EXCEEDED: &str = "quotagate.io/QuotaExceeded";
/// Its True reason, and the Warning event's when it turns True.
pub const REASON_QUOTA_EXCEEDED: &str = "QuotaExceeded";
/// Its False reason.
pub const REASON_WITHIN_QUOTA: &str = "WithinQuota";
