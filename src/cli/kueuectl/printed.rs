//! What a `list` command prints, shared by the list commands and `list pods`.

/// What a list prints: the table (or `-o` form) on stdout, or kubectl's "No resources found" on
/// stderr when nothing matched.
pub struct Printed {
    pub stdout: String,
    pub stderr: String,
}
