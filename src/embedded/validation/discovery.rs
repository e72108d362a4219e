//! EndpointSlices, after kube-apiserver's `pkg/apis/discovery/validation/validation.go`
//! (`ValidateEndpointSlice`): the address type, each endpoint's addresses, the ports.

use serde_json::Value;

use super::{PROTOCOLS, ip_address, list_at, not_supported, one_of, required, str_at};
use crate::api::validation::{FieldError, Path};

const ADDRESS_TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];
const MAX_ADDRESSES: usize = 100;

pub fn validate_endpoint_slice(obj: &Value, errs: &mut Vec<FieldError>) {
    let address_type = str_at(obj, "addressType").unwrap_or_default();
    let known = ADDRESS_TYPES.contains(&address_type);
    match obj.get("addressType") {
        None | Some(Value::Null) => errs.push(required(&Path::root("addressType"), "")),
        Some(v) if !known => errs.push(not_supported(&Path::root("addressType"), v, &ADDRESS_TYPES)),
        _ => {}
    }
    for (i, p) in list_at(obj, "ports").iter().enumerate() {
        let pp = Path::root("ports").index(i);
        one_of(p, "protocol", &pp, &PROTOCOLS, errs);
    }
    for (i, e) in list_at(obj, "endpoints").iter().enumerate() {
        let ep = Path::root("endpoints").index(i).child("addresses");
        let addrs = list_at(e, "addresses");
        if addrs.is_empty() {
            errs.push(required(&ep, "must contain at least 1 address"));
        } else if addrs.len() > MAX_ADDRESSES {
            errs.push(FieldError::new(
                &ep,
                crate::api::validation::ErrorType::TooMany,
                format!("{}: must have at most {MAX_ADDRESSES} items", addrs.len()),
            ));
        }
        if !known || address_type == "FQDN" {
            continue;
        }
        for (j, a) in addrs.iter().take(MAX_ADDRESSES).enumerate() {
            ip_address(&ep.index(j), a.as_str().unwrap_or_default(), errs);
        }
    }
}
