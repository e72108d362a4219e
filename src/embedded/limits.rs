//! Bounds on what one request can make the server build, as kube-apiserver's (README "Limits").
//!
//! Nesting depth matters beyond CPU: `serde_json::Value` is dropped, cloned, compared and serialized
//! by recursion, one stack frame (or a few) per level, on tokio worker threads with 2 MiB stacks.
//! serde_json's parser stops at [`MAX_DEPTH`] by itself, but a value built by a patch (a JSON patch
//! `copy` of an object into itself doubles its depth) never goes through the parser, so every path
//! that builds a value checks it here: request bodies of every content type, every patch type's
//! result, JSON patch operations while they apply. Objects loaded from the data directory go through
//! serde_json's parser, which refuses anything deeper; since nothing deeper is ever stored, a
//! restart reads back everything that was acknowledged.

use serde_json::Value;

/// The deepest nesting of arrays and objects the server keeps (a scalar is 0, `{"a": 1}` is 1).
///
/// serde_json's parser accepts 127 levels and refuses 128, so this is the most that the disk loader,
/// the in-process clients and the JSON request path can all read back: a patch cannot make an object
/// that a restart or a GET then fails to parse. Go's decoder (kube-apiserver) stops at 10,000; no
/// Kubernetes object comes near either (a pod spec is about 12 deep).
///
/// Stack budget, measured in a debug build (the deepest frames) by `depth_on_a_stack` below: cloning,
/// comparing, serializing and dropping a value 127 deep fits a 96 KiB stack (the test below runs it on
/// 128 KiB); on a 2 MiB stack, the size of a tokio worker's, the same operations pass at 3,500 levels
/// and overflow at 4,000 (about 550 bytes a level). The limit is thus 1/27 of what a worker can take,
/// and the reported 16,800-level copy patch is four times past it.
pub const MAX_DEPTH: usize = 127;

/// kube-apiserver's `maxJSONPatchOperations`.
pub const MAX_JSON_PATCH_OPS: usize = 10_000;

/// kube-apiserver's `JSONPatchMaxCopyBytes`: the bytes all `copy` operations of one JSON patch may
/// add, which it sets to its request-body limit (3 MiB).
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// How deep `v` nests, computed without recursion (so it is safe on any value, however deep), and
/// giving up as soon as it passes `limit`: `None` means deeper than `limit`.
pub fn depth_within(v: &Value, limit: usize) -> Option<usize> {
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        if !(v.is_array() || v.is_object()) {
            continue;
        }
        let d = d + 1;
        if d > limit {
            return None;
        }
        deepest = deepest.max(d);
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d))),
            Value::Object(m) => stack.extend(m.values().map(|c| (c, d))),
            _ => {}
        }
    }
    Some(deepest)
}

/// Whether `v` is within [`MAX_DEPTH`].
pub fn within_depth(v: &Value) -> bool {
    depth_within(v, MAX_DEPTH).is_some()
}

/// The phrase Go's JSON decoder uses for the same refusal, so clients that match on it still do.
pub const TOO_DEEP: &str = "exceeded max depth";

#[cfg(test)]
pub(crate) fn nested(depth: usize) -> Value {
    let mut v = Value::from(1);
    for i in 0..depth {
        v = if i % 2 == 0 {
            serde_json::json!({ "a": v })
        } else {
            serde_json::json!([v])
        };
    }
    v
}

/// The heap an object takes parsed, in bytes, estimated from serde_json's layout (with
/// `preserve_order`, each JSON object an IndexMap: an entry of hash + key + value per field, its
/// own table of indices, and a heap allocation per key and string), rounded to 16-byte allocations,
/// plus a store entry: the `Arc`, the map key (namespace and name) and the uid index. What the
/// storage quota counts (`store.rs`): about ten times a pod's compact JSON. The store keeps the
/// JSON (`stored.rs`), about 1.2 times it; the quota counts the parsed size because that is what a
/// stored object costs the process once an in-process cache holds it (the manager's reflectors,
/// the simulators), so a quota bounds the process, not only the store (issue 60). Checked against
/// a counting allocator by `tests/embedded_memory.rs`.
pub fn held_bytes(v: &Value) -> usize {
    /// Per stored object beyond its value: the `Arc` (two counts + the value), the objects map's
    /// key and node share, the uid index's entry (a 36-byte uid string, the key again).
    const ENTRY: usize = 16 + std::mem::size_of::<Value>() + 3 * 64 + 48;
    let meta = v.get("metadata");
    let key = |f: &str| {
        meta.and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .map_or(0, str::len)
    };
    ENTRY + 2 * alloc(key("namespace") + key("name")) + value_heap(v)
}

/// An allocation of `n` bytes, rounded up to the allocator's 16-byte classes.
fn alloc(n: usize) -> usize {
    n.next_multiple_of(16)
}

/// Heap bytes below one `Value` (not counting the `Value` itself).
fn value_heap(v: &Value) -> usize {
    const VALUE: usize = std::mem::size_of::<Value>();
    // indexmap's Bucket: the hash, the key, the value.
    const BUCKET: usize = std::mem::size_of::<usize>() + std::mem::size_of::<String>() + VALUE;
    match v {
        Value::String(s) => alloc(s.capacity()),
        Value::Array(a) => alloc(a.capacity() * VALUE) + a.iter().map(value_heap).sum::<usize>(),
        Value::Object(m) => {
            let n = m.len();
            if n == 0 {
                return 0;
            }
            // hashbrown's table: a power of two of buckets, 7/8 full at most (3 of 4 when small),
            // one usize index and one control byte each, plus a group of control bytes.
            let buckets = if n < 4 {
                4
            } else if n < 7 {
                8
            } else {
                (n * 8).div_ceil(7).next_power_of_two()
            };
            // The entries: exactly `n` (a parsed map may have grown past it: an estimate).
            alloc(buckets * std::mem::size_of::<usize>() + buckets + 16)
                + alloc(n * BUCKET)
                + m.iter()
                    .map(|(k, v)| alloc(k.len()) + value_heap(v))
                    .sum::<usize>()
        }
        _ => 0,
    }
}

/// An object's size as compact JSON, counted without building the bytes.
pub fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a Value into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the storage quota counts grows with what an object holds: a long string costs its
    /// bytes, a field its IndexMap entry, and every object the store's entry.
    #[test]
    fn held_bytes_counts_strings_fields_and_the_entry() {
        let empty = held_bytes(&json!({}));
        assert!(empty >= std::mem::size_of::<Value>(), "{empty}");
        let long = held_bytes(&json!({"data": "x".repeat(4000)}));
        assert!((4000..4000 + 1024).contains(&(long - empty)), "{long} - {empty}");
        let fields = held_bytes(&json!({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8}));
        assert!(
            fields - empty >= 8 * std::mem::size_of::<Value>(),
            "{fields} - {empty}"
        );
    }

    #[test]
    fn depth_counts_containers() {
        assert_eq!(depth_within(&json!(1), 10), Some(0));
        assert_eq!(depth_within(&json!({}), 10), Some(1));
        assert_eq!(depth_within(&json!({"a": [1, {"b": []}], "c": 2}), 10), Some(4));
        assert_eq!(depth_within(&nested(50), 50), Some(50));
        assert_eq!(depth_within(&nested(51), 50), None);
    }

    #[test]
    fn the_limit_is_what_serde_json_reads_back() {
        let at = serde_json::to_vec(&nested(MAX_DEPTH)).unwrap();
        let parsed: Value = serde_json::from_slice(&at).unwrap();
        assert!(within_depth(&parsed));
        let over = serde_json::to_vec(&nested(MAX_DEPTH + 1)).unwrap();
        let err = serde_json::from_slice::<Value>(&over).unwrap_err().to_string();
        assert!(err.contains("recursion limit"), "{err}");
        // Built deeper than any parser allows, the check still answers (no recursion in it).
        let mut deep = Value::Null;
        for _ in 0..200_000 {
            deep = Value::Array(vec![deep]);
        }
        assert!(!within_depth(&deep));
        // Taken apart by hand: dropping it whole would recurse 200,000 frames deep.
        while let Value::Array(mut a) = deep {
            deep = a.pop().unwrap_or(Value::Null);
        }
    }

    fn exercise_at_limit() {
        let v = nested(MAX_DEPTH);
        let copy = v.clone();
        assert_eq!(copy, v);
        let bytes = serde_json::to_vec(&copy).unwrap();
        assert!(!bytes.is_empty());
        drop(copy);
    }

    /// The stack budget behind [`MAX_DEPTH`]: a value at the limit fits a 128 KiB stack, 1/16 of a
    /// tokio worker's.
    #[test]
    fn a_value_at_the_depth_limit_fits_a_small_stack() {
        std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(exercise_at_limit)
            .unwrap()
            .join()
            .unwrap();
    }

    /// By hand, one run per figure in [`MAX_DEPTH`]'s comment (an overflow aborts the process):
    /// `QG_DEPTH=4000 QG_STACK=2097152 cargo test --lib depth_on_a_stack -- --ignored`.
    #[test]
    #[ignore]
    fn depth_on_a_stack() {
        let depth: usize = std::env::var("QG_DEPTH")
            .ok()
            .and_then(|d| d.parse().ok())
            .unwrap_or(MAX_DEPTH);
        let stack: usize = std::env::var("QG_STACK")
            .ok()
            .and_then(|d| d.parse().ok())
            .unwrap_or(2 << 20);
        let run = move || {
            let v = nested(depth);
            let copy = v.clone();
            assert_eq!(copy, v);
            let _ = serde_json::to_vec(&copy);
        };
        std::thread::Builder::new()
            .stack_size(stack)
            .spawn(run)
            .unwrap()
            .join()
            .unwrap();
    }
}
