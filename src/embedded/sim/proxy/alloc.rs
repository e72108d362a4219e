//! ClusterIPs of one process-runtime instance: the /24 10.96.B.0/24 of the Kubernetes default service
//! CIDR 10.96.0.0/12, where B is the instance's pod block (10.244.B.0/24), so instances on one host never
//! hand out the same address. .0 and .255 are not used, .1 is `kubernetes.default` on a real cluster and
//! is left free too.

use std::collections::HashSet;
use std::net::Ipv4Addr;

pub const FIRST: u8 = 2;
pub const LAST: u8 = 254;

pub fn cidr(block: u8) -> String {
    format!("10.96.{block}.0/24")
}

pub fn contains(block: u8, ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    o[0] == 10 && o[1] == 96 && o[2] == block && (FIRST..=LAST).contains(&o[3])
}

/// The address a new Service gets: the one it asks for (its `spec.clusterIP`) when that is in this
/// instance's range and free, else the lowest free one; None when the range is full.
pub fn pick(block: u8, taken: &HashSet<Ipv4Addr>, wanted: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
    if let Some(w) = wanted.filter(|w| contains(block, *w) && !taken.contains(w)) {
        return Some(w);
    }
    (FIRST..=LAST)
        .map(|h| Ipv4Addr::new(10, 96, block, h))
        .find(|a| !taken.contains(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wanted_when_ours_and_free_else_lowest_free() {
        let mut taken = HashSet::new();
        assert_eq!(pick(130, &taken, None), Some(Ipv4Addr::new(10, 96, 130, 2)));
        taken.insert(Ipv4Addr::new(10, 96, 130, 2));
        assert_eq!(pick(130, &taken, None), Some(Ipv4Addr::new(10, 96, 130, 3)));
        assert_eq!(
            pick(130, &taken, Some(Ipv4Addr::new(10, 96, 130, 9))),
            Some(Ipv4Addr::new(10, 96, 130, 9))
        );
        // Another instance's range, or a taken address: not honoured.
        assert_eq!(
            pick(130, &taken, Some(Ipv4Addr::new(10, 96, 131, 9))),
            Some(Ipv4Addr::new(10, 96, 130, 3))
        );
        assert_eq!(
            pick(130, &taken, Some(Ipv4Addr::new(10, 96, 130, 2))),
            Some(Ipv4Addr::new(10, 96, 130, 3))
        );
        let full: HashSet<_> = (FIRST..=LAST).map(|h| Ipv4Addr::new(10, 96, 130, h)).collect();
        assert_eq!(pick(130, &full, None), None);
        assert_eq!(cidr(130), "10.96.130.0/24");
    }
}
