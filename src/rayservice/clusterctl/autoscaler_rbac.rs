//! The autoscaler's ServiceAccount, Role and RoleBinding (`cluster::autoscaler_rbac`), created when
//! absent and never rewritten, in KubeRay's order; they go with the RayCluster (owner reference).

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::PostParams;
use kube::runtime::events::EventType;
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::context::{Context, Error, publish};
use crate::api::ray::RayCluster;
use crate::kit::shell;
use crate::rayservice::cluster::autoscaler_rbac as build;
use crate::rayservice::cluster::names;

/// KubeRay's event reason when the head template names a ServiceAccount that does not exist.
pub const REASON_SA_NOT_FOUND: &str = crate::api::ray::constants::REASON_AUTOSCALER_SA_NOT_FOUND;

/// Nothing without in-tree autoscaling. A ServiceAccount the user named and did not create stops the
/// reconcile (as in KubeRay: the head pod would be refused anyway) with a Warning event saying so.
pub async fn ensure(rc: &RayCluster, ns: &str, ctx: &Context) -> Result<(), Error> {
    if !rc.spec.autoscaling_enabled() {
        return Ok(());
    }
    let sa_api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), ns);
    let sa_name = names::check_name(&build::service_account_name(rc));
    if sa_api.get_opt(&sa_name).await?.is_none() {
        if build::user_names_service_account(rc) {
            let msg = format!(
                "Failed to reconcile RayCluster {ns}/{}. If users specify ServiceAccountName for the head Pod, they need to create a ServiceAccount themselves. However, ServiceAccount {sa_name} is not found. Please create one.",
                rc.name_any()
            );
            publish(ctx, rc, EventType::Warning, REASON_SA_NOT_FOUND, msg).await;
            return Err(Error::ServiceAccountNotFound(sa_name));
        }
        create(
            ctx,
            rc,
            &sa_api,
            build::service_account(rc),
            "CreatedServiceAccount",
        )
        .await?;
    }
    let roles: Api<Role> = Api::namespaced(ctx.client.clone(), ns);
    create_if_absent(ctx, rc, &roles, build::role(rc), "CreatedRole").await?;
    let bindings: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), ns);
    create_if_absent(ctx, rc, &bindings, build::role_binding(rc), "CreatedRoleBinding").await
}

async fn create_if_absent<K>(
    ctx: &Context,
    rc: &RayCluster,
    api: &Api<K>,
    obj: K,
    reason: &str,
) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    if api.get_opt(&obj.name_any()).await?.is_some() {
        return Ok(());
    }
    create(ctx, rc, api, obj, reason).await
}

async fn create<K>(ctx: &Context, rc: &RayCluster, api: &Api<K>, obj: K, reason: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let name = obj.name_any();
    // Created concurrently (or by the user meanwhile): keep theirs, as KubeRay does.
    if shell::ignore_already_exists(api.create(&PostParams::default(), &obj).await)?.is_some() {
        let kind = K::kind(&());
        publish(
            ctx,
            rc,
            EventType::Normal,
            reason,
            format!("Created {kind} {}/{name}", rc.namespace().unwrap_or_default()),
        )
        .await;
    }
    Ok(())
}
