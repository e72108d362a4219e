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
