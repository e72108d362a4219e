//! Ages and durations as kubectl prints them (apimachinery's `duration.HumanDuration`), for the
//! Tables of `table.rs` and `printers.rs`.

/// Age as kubectl prints it (`translateTimestampSince`): the time since `created`, `<unknown>` for
/// none.
pub fn age(created: &str) -> String {
    let Ok(t) = created.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    human_duration(jiff::Timestamp::now().as_second() - t.as_second())
}

/// apimachinery's `duration.HumanDuration`: two significant units while they matter
/// (`90s`, `5m30s`, `2h15m`, `3d4h`, `2y10d`).
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 120 {
        return format!("{}s", secs.max(0));
    }
    let (minutes, hours, days) = (secs / 60, secs / 3600, secs / 86_400);
    let two = |big: i64, unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{small_unit}")
        }
    };
    match () {
        _ if minutes < 10 => two(minutes, "m", secs % 60, "s"),
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => two(hours, "h", minutes % 60, "m"),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 24 * 8 => two(days, "d", hours % 24, "h"),
        _ if hours < 24 * 365 * 2 => format!("{days}d"),
        _ if hours < 24 * 365 * 8 => two(days / 365, "y", days % 365, "d"),
        _ => format!("{}y", days / 365),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// apimachinery pkg/util/duration/duration_test.go, TestHumanDuration.
    #[test]
    fn human_durations() {
        let cases = [
            (1, "1s"),
            (70, "70s"),
            (190, "3m10s"),
            (600, "10m"),
            (3600 + 60, "61m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 120, "3h2m"),
            (9 * 3600, "9h"),
            (48 * 3600, "2d"),
            (48 * 3600 + 3600, "2d1h"),
            (8 * 86_400, "8d"),
            (367 * 86_400, "367d"),
            (2 * 365 * 86_400 + 86_400, "2y1d"),
            (8 * 365 * 86_400, "8y"),
            (-5, "<invalid>"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }
}
