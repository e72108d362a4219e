//! Validation of Kueue objects.
