//! The differences known on main today: sequence name → why, as the suite found them against
//! kube-apiserver v1.36.3 (mostly the first differing field, embedded | kube-apiserver). The prefix
//! says what kind of gap it is: `no value check` (a built-in kind's validation the embedded server
//! lacks), `no defaulting` (a field kube-apiserver defaults), `server-side apply` (field ownership and
//! conflicts), `patch`, `unknown fields kept` (a real server drops them unless asked to refuse),
//! `option check` (a request option kube-apiserver refuses), `wording` (the same refusal, other words,
//! code or details), `behaviour`, `not served`. `deliberate` marks a difference kept on purpose, with
//! the reason; every other entry is a gap to close.
//!
//! The test fails when one of these matches again (remove it) and when a sequence not listed here
//! differs (fix it, or list it with its reason).

pub const EXPECTED_DIFFERENCES: &[(&str, &str)] = &[
    // crud
    // patch
    // apply
    // fieldValidation
    (
        r#"json patch adding an unknown field, Strict"#,
        r#"deliberate: the same 422 Invalid on `patch` with the same strict decoding error, quoting the patched object as kube-apiserver does; the quoted object holds the uid, resourceVersion and times each server gave it, which no normaliser reaches inside a message"#,
    ),
    (
        r#"apply with an unknown field, Strict"#,
        r#"deliberate: kube-apiserver answers 500 (its typed-patch conversion fails); the embedded server refuses with 400 BadRequest naming the field, a client's error"#,
    ),
    (
        r#"apply with a duplicate key, Strict"#,
        r#"deliberate: the same refusal; the message is the YAML parser's where kube-apiserver quotes sigs.k8s.io/yaml's"#,
    ),
    // dryRun
    // subresources
    // deletion
    // garbage collection
    // selectors
    // pagination
    (
        r#"resourceVersion 0 with limit"#,
        r#"deliberate: kube-apiserver serves resourceVersion=0 from its watch cache and ignores limit (5 items); the embedded server has no watch cache and honours limit (2), which the API allows either way"#,
    ),
    // watch
    (
        r#"watch with a resourceVersion that does not parse"#,
        r#"deliberate: kube-apiserver answers a malformed resourceVersion with 500 (its storage layer's parse error); the embedded server says 400 BadRequest, a client's error"#,
    ),
    // events
    // rbac
    // tokens
    // core values
    (
        r#"pod image update is allowed, other spec updates are refused"#,
        r#"deliberate: the same 422 Forbidden on `spec` with the same first sentence; kube-apiserver then appends a unified diff of the indented JSON of its internal Go PodSpec structs (apimachinery util/diff.Diff: every internal field with Go's field names and zero values, whose layout follows Go's type definitions and changes between releases), the embedded server the list of what may change; no client parses either"#,
    ),
    // batch values
    (
        r#"job template change is refused"#,
        r#"deliberate: the same 422 on `spec.template.spec` (`field is immutable`); kube-apiserver prints the rejected value as its internal Go struct (`{"Volumes":null,...}`, internal field names no API version has), the embedded server as the object's JSON, the form a client can read"#,
    ),
    // quotagate CRDs
    // samples
];
