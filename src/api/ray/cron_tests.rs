use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn utc() -> TimeZone {
    TimeZone::UTC
}

fn next(spec: &str, after: &str) -> Option<String> {
    Schedule::parse(spec)
        .unwrap()
        .next(ts(after), &utc())
        .map(|t| t.to_string())
}

/// The chain `next(anchor)`, `next(next(anchor))`, ... walked one by one: what `latest` must equal.
fn walked_latest(s: &Schedule, anchor: Timestamp, at: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    let mut found = None;
    let mut t = anchor;
    while let Some(n) = s.next(t, tz).filter(|n| *n <= at) {
        found = Some(n);
        t = n;
    }
    found
}

/// KubeRay `raycronjob_controller_unit_test.go` `TestRayCronJobReconcile_FirstSchedule`: `*/5 * * * *`
/// created at 00:00 runs at 00:05, then 00:10.
#[test]
fn every_five_minutes_from_midnight() {
    assert_eq!(
        next("*/5 * * * *", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-01T00:05:00Z")
    );
    assert_eq!(
        next("*/5 * * * *", "2024-01-01T00:05:00Z").as_deref(),
        Some("2024-01-01T00:10:00Z")
    );
    assert_eq!(
        next("*/5 * * * *", "2024-01-01T00:04:59.900Z").as_deref(),
        Some("2024-01-01T00:05:00Z")
    );
    assert_eq!(
        next("* * * * *", "2024-12-31T23:59:30Z").as_deref(),
        Some("2025-01-01T00:00:00Z")
    );
}

#[test]
fn fields_ranges_steps_lists_and_names() {
    assert_eq!(
        next("15,45 9-17/4 * * *", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-01T09:15:00Z")
    );
    assert_eq!(
        next("15,45 9-17/4 * * *", "2024-01-01T09:15:00Z").as_deref(),
        Some("2024-01-01T09:45:00Z")
    );
    assert_eq!(
        next("15,45 9-17/4 * * *", "2024-01-01T09:45:00Z").as_deref(),
        Some("2024-01-01T13:15:00Z")
    );
    // `N/STEP` runs to the field's maximum.
    assert_eq!(
        next("50/5 * * * *", "2024-01-01T00:56:00Z").as_deref(),
        Some("2024-01-01T01:50:00Z")
    );
    // Names, any case; 2024-01-01 is a Monday.
    assert_eq!(
        next("0 0 * FEB-mar SAT", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-02-03T00:00:00Z")
    );
    assert_eq!(
        next("0 12 ? * sun", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-07T12:00:00Z")
    );
    assert_eq!(
        next("0 0 1 1 *", "2024-06-01T00:00:00Z").as_deref(),
        Some("2025-01-01T00:00:00Z")
    );
    assert_eq!(
        next("0 0 29 2 *", "2024-03-01T00:00:00Z").as_deref(),
        Some("2028-02-29T00:00:00Z")
    );
}

/// robfig's `dayMatches`: AND when either day field is `*`/`?` (or `*/1`), OR when both are restricted;
/// `*/2` is restricted (a step above 1 drops the star).
#[test]
fn day_of_month_and_weekday_follow_vixie_cron() {
    // 2024-01-03 is a Wednesday.
    assert_eq!(
        next("0 0 * * 3", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-03T00:00:00Z")
    );
    assert_eq!(
        next("0 0 15 * 3", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-03T00:00:00Z"),
        "OR"
    );
    assert_eq!(
        next("0 0 2 * 3", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-02T00:00:00Z"),
        "OR"
    );
    assert_eq!(
        next("0 0 */2 * 2", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-02T00:00:00Z"),
        "*/2 is restricted: odd days OR Tuesday"
    );
    assert_eq!(
        next("0 0 */1 * 3", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-03T00:00:00Z"),
        "*/1 keeps the star: AND"
    );
    assert_eq!(
        next("0 0 15 * ?", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-15T00:00:00Z")
    );
}

#[test]
fn descriptors() {
    assert_eq!(
        next("@hourly", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-01T01:00:00Z")
    );
    assert_eq!(
        next("@daily", "2024-01-01T00:00:01Z").as_deref(),
        Some("2024-01-02T00:00:00Z")
    );
    assert_eq!(
        next("@midnight", "2024-01-01T00:00:01Z").as_deref(),
        Some("2024-01-02T00:00:00Z")
    );
    assert_eq!(
        next("@weekly", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-01-07T00:00:00Z"),
        "Sundays"
    );
    assert_eq!(
        next("@monthly", "2024-01-01T00:00:00Z").as_deref(),
        Some("2024-02-01T00:00:00Z")
    );
    assert_eq!(
        next("@yearly", "2024-01-01T00:00:00Z").as_deref(),
        Some("2025-01-01T00:00:00Z")
    );
    assert_eq!(
        next("@annually", "2024-01-01T00:00:00Z").as_deref(),
        Some("2025-01-01T00:00:00Z")
    );
    // `@every`: from the whole second, whole seconds, at least one.
    assert_eq!(
        next("@every 90s", "2024-01-01T12:00:00.500Z").as_deref(),
        Some("2024-01-01T12:01:30Z")
    );
    assert_eq!(
        next("@every 1m30.9s", "2024-01-01T12:00:00Z").as_deref(),
        Some("2024-01-01T12:01:30Z")
    );
    assert_eq!(
        next("@every 200ms", "2024-01-01T12:00:00Z").as_deref(),
        Some("2024-01-01T12:00:01Z")
    );
    assert_eq!(
        next("@every 1h", "2024-01-01T12:00:00Z").as_deref(),
        Some("2024-01-01T13:00:00Z")
    );
}

/// A schedule with no time in five years has no next time (robfig returns the zero time).
#[test]
fn impossible_dates_have_no_next_time() {
    assert_eq!(next("0 0 30 2 *", "2024-01-01T00:00:00Z"), None);
    assert_eq!(next("0 0 31 4,6,9,11 *", "2024-01-01T00:00:00Z"), None);
    let s = Schedule::parse("0 0 30 2 *").unwrap();
    assert_eq!(
        s.latest(ts("2000-01-01T00:00:00Z"), ts("2024-01-01T00:00:00Z"), &utc()),
        None
    );
}

/// What `cron.ParseStandard` refuses (KubeRay `validation_test.go` "Invalid cron schedule" and robfig's
/// parser rules).
#[test]
fn refused_schedules_say_why() {
    let err = |s: &str| Schedule::parse(s).unwrap_err();
    assert_eq!(err(""), "empty spec string");
    assert_eq!(
        err("invalid cron"),
        "expected exactly 5 fields, found 2: invalid cron"
    );
    assert!(err("invalid cron string x y").starts_with("failed to parse int from invalid"));
    assert_eq!(err("* * * *"), "expected exactly 5 fields, found 4: * * * *");
    assert_eq!(
        err("0 * * * * *"),
        "expected exactly 5 fields, found 6: 0 * * * * *",
        "no seconds field"
    );
    assert_eq!(err("60 * * * *"), "end of range (60) above maximum (59): 60");
    assert_eq!(err("* 24 * * *"), "end of range (24) above maximum (23): 24");
    assert_eq!(err("* * 0 * *"), "beginning of range (0) below minimum (1): 0");
    assert_eq!(err("* * * 13 *"), "end of range (13) above maximum (12): 13");
    assert_eq!(
        err("* * * * 7"),
        "end of range (7) above maximum (6): 7",
        "Sunday is 0 only"
    );
    assert_eq!(
        err("5-1 * * * *"),
        "beginning of range (5) beyond end of range (1): 5-1"
    );
    assert_eq!(
        err("*/0 * * * *"),
        "step of range should be a positive number: */0"
    );
    assert_eq!(err("1-2-3 * * * *"), "too many hyphens: 1-2-3");
    assert_eq!(err("1/2/3 * * * *"), "too many slashes: 1/2/3");
    assert!(err("L * * * *").starts_with("failed to parse int from L"));
    assert!(err("* * * * 1#2").starts_with("failed to parse int from 1#2"));
    assert!(err("99999999999999999999 * * * *").contains("above maximum"));
    assert_eq!(err("@reboot"), "unrecognized descriptor: @reboot");
    assert!(err("@every 5x").starts_with("failed to parse duration @every 5x"));
    assert!(err("@every").starts_with("unrecognized descriptor"));
}

#[test]
fn time_zones_move_the_wall_clock_time() {
    let taipei = TimeZone::get("Asia/Taipei").unwrap();
    let s = Schedule::parse("0 9 * * *").unwrap();
    assert_eq!(
        s.next(ts("2024-01-01T00:00:00Z"), &taipei),
        Some(ts("2024-01-01T01:00:00Z")),
        "09:00 at +08:00"
    );
    assert_eq!(
        s.latest(ts("2023-12-01T00:00:00Z"), ts("2024-01-01T00:00:00Z"), &taipei),
        Some(ts("2023-12-31T01:00:00Z"))
    );
}

/// Across both daylight-saving changes of a year, `latest` agrees with walking `next` one time at a
/// time, and every time `next` gives is later than the one before.
#[test]
fn latest_agrees_with_walking_next_across_daylight_saving() {
    let ny = TimeZone::get("America/New_York").unwrap();
    for spec in [
        "30 2 * * *",
        "0 1 * * *",
        "*/20 1-3 * * *",
        "0 0 * * 0",
        "15 */7 * * *",
    ] {
        let s = Schedule::parse(spec).unwrap();
        let anchor = ts("2024-03-01T00:00:00Z");
        let mut t = anchor;
        for at in [
            "2024-03-10T05:00:00Z",
            "2024-03-10T08:00:00Z",
            "2024-03-11T00:00:00Z",
            "2024-11-03T05:30:00Z",
            "2024-11-03T07:10:00Z",
            "2024-11-04T12:00:00Z",
        ] {
            let at = ts(at);
            assert_eq!(
                s.latest(anchor, at, &ny),
                walked_latest(&s, anchor, at, &ny),
                "{spec} at {at}"
            );
        }
        for _ in 0..200 {
            let n = s.next(t, &ny).unwrap();
            assert!(n > t, "{spec}: {n} after {t}");
            t = n;
        }
    }
}

/// A schedule missed for a year: `latest` gives the last time before now at once (batch CronJob's
/// rule; KubeRay would catch up one time per reconcile).
#[test]
fn a_year_missed_is_one_step() {
    let s = Schedule::parse("* * * * *").unwrap();
    let started = std::time::Instant::now();
    let got = s.latest(ts("2023-01-01T00:00:00Z"), ts("2024-01-01T12:34:56Z"), &utc());
    assert_eq!(got, Some(ts("2024-01-01T12:34:00Z")));
    let every = Schedule::parse("@every 7s").unwrap();
    assert_eq!(
        every.latest(ts("2023-01-01T00:00:00Z"), ts("2024-01-01T00:00:00Z"), &utc()),
        walked_latest_every()
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(1));
}

/// `@every 7s` from 2023-01-01: the time 7 s steps after it that is last before 2024-01-01.
fn walked_latest_every() -> Option<Timestamp> {
    let year = 365 * 24 * 3600_i64;
    let steps = year / 7;
    Some(
        ts("2023-01-01T00:00:00Z")
            .checked_add(jiff::SignedDuration::from_secs(steps * 7))
            .unwrap(),
    )
}

mod prop {
    use proptest::prelude::*;

    use super::*;

    fn part(max: u32) -> impl Strategy<Value = String> {
        prop_oneof![
            Just("*".to_string()),
            (0..=max).prop_map(|v| v.to_string()),
            (0..=max, 0..=max).prop_map(|(a, b)| format!("{}-{}", a.min(b), a.max(b))),
            (1..=max.max(1)).prop_map(|s| format!("*/{s}")),
            (0..=max, 0..=max).prop_map(|(a, b)| format!("{a},{b}")),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// For schedules built from the grammar, `latest` equals walking `next` over a few weeks, and
        /// every `next` is a matching minute after its start.
        #[test]
        fn latest_equals_the_walk(minute in part(59), hour in part(23), dom in part(30), dow in part(6), start in 0i64..400_000_000, span in 0i64..2_000_000) {
            let dom = dom.replace('0', "1");
            let spec = format!("{minute} {hour} {dom} * {dow}");
            let Ok(s) = Schedule::parse(&spec) else { return Ok(()) };
            let anchor = Timestamp::from_second(1_600_000_000 + start).unwrap();
            let at = Timestamp::from_second(1_600_000_000 + start + span).unwrap();
            prop_assert_eq!(s.latest(anchor, at, &TimeZone::UTC), walked_latest(&s, anchor, at, &TimeZone::UTC), "{}", spec);
        }
    }
}
