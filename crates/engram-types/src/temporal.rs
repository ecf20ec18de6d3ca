//! Temporal reasoning: dates in text found and resolved to day ranges.
//!
//! A mention is an absolute date (`8 May 2023`, `May 2023`, `2023-05-08`, `in 2022`) or a
//! relative phrase (`yesterday`, `last week`, `two days ago`, `last Friday`, `next month`)
//! resolved against an anchor: the time of the item that says it (its `timestamp`, else when it
//! was stored) or, for a query, `temporal_now`. A query is classified by what it asks: a
//! `range` (it names a time: "what did Sam do in October 2023?"), `when` (it asks for one:
//! "when did Caroline go to the support group?") or `duration` ("how long did it take?").
//! Retrieval then promotes, within a bounded margin, the chunks whose mentions or anchor fall
//! in the query's range, or that carry a date at all for a `when` question.

use std::sync::OnceLock;

use regex::{Captures, Regex};
use time::{Date, Duration, Month, Weekday};

/// How finely a mention's range is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Day,
    Week,
    Month,
    Year,
}

impl Precision {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Year => "year",
        }
    }
}

/// A date phrase in a text, resolved to the days it covers (inclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mention {
    /// The phrase as written.
    pub phrase: String,
    pub start: Date,
    pub end: Date,
    pub precision: Precision,
}

impl Mention {
    /// Whether the mention shares a day with `start..=end`.
    pub fn overlaps(&self, start: Date, end: Date) -> bool {
        self.start <= end && start <= self.end
    }
}

/// What a query asks of time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemporalIntent {
    /// The query names a time: results in it are wanted.
    Range(Mention),
    /// The query asks when something happened: results that carry a date are wanted.
    When,
    /// The query asks how long something took.
    Duration,
    /// Nothing temporal.
    None,
}

impl TemporalIntent {
    pub fn mode(&self) -> &'static str {
        match self {
            Self::Range(_) => "range",
            Self::When => "when",
            Self::Duration => "duration",
            Self::None => "none",
        }
    }
}

const MONTHS: &str = "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?";
const WEEKDAYS: &str = "monday|tuesday|wednesday|thursday|friday|saturday|sunday";
const COUNTS: &str = r"\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a couple of|a few|few|several";
const UNITS: &str = "day|week|month|year";
/// Words that may lead an absolute date, matched with it (so that "since May 2023" is read as
/// one phrase, not as "since May" then "2023").
const LEAD: &str = r"(?:(?:in|on|since|during|by|of|from|until|before|after)\s+)?";

fn pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        let alternatives = [
            format!(r"(?P<week_of>\b(?P<wo_n>first|second|third|fourth|last)\s+week\s+of\s+(?P<wo_m>{MONTHS})\.?,?(?:\s+(?P<wo_y>\d{{4}}))?\b)"),
            r"(?P<iso>\b(?P<iy>\d{4})-(?P<im>\d{2})-(?P<id>\d{2})(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?\b)".to_owned(),
            format!(r"(?P<dmy>\b{LEAD}(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m1>{MONTHS})\.?,?\s*(?P<y1>\d{{4}})\b)"),
            format!(r"(?P<mdy>\b{LEAD}(?P<m2>{MONTHS})\.?\s+(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?,?\s+(?P<y2>\d{{4}})\b)"),
            format!(r"(?P<my>\b{LEAD}(?P<m3>{MONTHS})\.?,?\s+(?:of\s+)?(?P<y3>\d{{4}})\b)"),
            format!(r"(?P<dm>\b{LEAD}(?P<d4>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m4>{MONTHS})\b)"),
            format!(r"(?P<md>\b{LEAD}(?P<m5>{MONTHS})\s+(?P<d5>\d{{1,2}})(?:st|nd|rd|th)?\b)"),
            format!(r"(?P<rel_month>\b(?P<rm_dir>last|this|next|in|during|since)\s+(?P<m6>{MONTHS})\b)"),
            r"(?P<year>\b(?:in|since|during|of|by|early|late|mid)\s+(?P<y7>(?:19|20)\d{2})\b)".to_owned(),
            r"(?P<day_word>\b(?:yesterday|today|tonight|tomorrow|last night|this morning|this afternoon|this evening)\b)".to_owned(),
            format!(r"(?P<ago>\b(?P<ago_n>{COUNTS})\s+(?P<ago_u>{UNITS})s?\s+ago\b)"),
            format!(r"(?P<ahead>\bin\s+(?P<ahead_n>{COUNTS})\s+(?P<ahead_u>{UNITS})s?\b)"),
            format!(r"(?P<rel_weekday>\b(?P<wd_dir>last|this|next|on|past)\s+(?P<wd>{WEEKDAYS})\b)"),
            r"(?P<rel_unit>\b(?P<ru_dir>last|this|next|past)\s+(?P<ru>week|weekend|month|year|summer|winter|spring|fall|autumn)\b)".to_owned(),
        ];
        let joined = alternatives.join("|");
        Regex::new(&format!("(?i){joined}")).unwrap_or_else(|e| unreachable!("{e}"))
    })
}

fn month_of(text: &str) -> Option<Month> {
    let lower = text.to_ascii_lowercase();
    let month = match lower.get(..3)? {
        "jan" => Month::January,
        "feb" => Month::February,
        "mar" => Month::March,
        "apr" => Month::April,
        "may" => Month::May,
        "jun" => Month::June,
        "jul" => Month::July,
        "aug" => Month::August,
        "sep" => Month::September,
        "oct" => Month::October,
        "nov" => Month::November,
        "dec" => Month::December,
        _ => return None,
    };
    Some(month)
}

fn weekday_of(text: &str) -> Option<Weekday> {
    Some(match text.to_ascii_lowercase().as_str() {
        "monday" => Weekday::Monday,
        "tuesday" => Weekday::Tuesday,
        "wednesday" => Weekday::Wednesday,
        "thursday" => Weekday::Thursday,
        "friday" => Weekday::Friday,
        "saturday" => Weekday::Saturday,
        "sunday" => Weekday::Sunday,
        _ => return None,
    })
}

fn count_of(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    Some(match lower.as_str() {
        "a" | "an" | "one" => 1,
        "two" | "a couple of" => 2,
        "three" | "a few" | "few" | "several" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        digits => digits.parse().ok().filter(|n| *n <= 500)?,
    })
}

fn month_range(year: i32, month: Month) -> Option<(Date, Date)> {
    let start = Date::from_calendar_date(year, month, 1).ok()?;
    let end = Date::from_calendar_date(year, month, time::util::days_in_month(month, year)).ok()?;
    Some((start, end))
}

fn year_range(year: i32) -> Option<(Date, Date)> {
    Some((
        Date::from_calendar_date(year, Month::January, 1).ok()?,
        Date::from_calendar_date(year, Month::December, 31).ok()?,
    ))
}

/// `day` moved by `days` (either way); `None` past the calendar's ends (years +-9999), which a
/// stored timestamp can reach.
fn shifted(day: Date, days: i64) -> Option<Date> {
    day.checked_add(Duration::days(days))
}

/// Days from weekday `from` forward to the next `to` (1 to 7: never the same day).
fn days_to(from: Weekday, to: Weekday) -> i64 {
    let ahead = (i64::from(to.number_days_from_monday())
        - i64::from(from.number_days_from_monday()))
    .rem_euclid(7);
    if ahead == 0 {
        7
    } else {
        ahead
    }
}

/// Monday to Sunday of the week holding `day`.
fn week_of(day: Date) -> Option<(Date, Date)> {
    let monday = shifted(day, -i64::from(day.weekday().number_days_from_monday()))?;
    Some((monday, shifted(monday, 6)?))
}

fn shift_months(day: Date, months: i64) -> Option<Date> {
    let index = i64::from(day.year()) * 12 + i64::from(day.month() as u8) - 1 + months;
    let year = i32::try_from(index.div_euclid(12)).ok()?;
    let month = Month::try_from(u8::try_from(index.rem_euclid(12) + 1).ok()?).ok()?;
    Date::from_calendar_date(year, month, 1).ok()
}

fn day(year: i32, month: Month, day: &str) -> Option<Date> {
    Date::from_calendar_date(year, month, day.parse().ok()?).ok()
}

/// The season's months (northern hemisphere) in `year`: summer is June to August.
fn season(name: &str, year: i32) -> Option<(Date, Date)> {
    let (first, last) = match name {
        "spring" => (Month::March, Month::May),
        "summer" => (Month::June, Month::August),
        "fall" | "autumn" => (Month::September, Month::November),
        _ => (Month::December, Month::February),
    };
    let start_year = year;
    let end_year = if last < first { year + 1 } else { year };
    Some((
        month_range(start_year, first)?.0,
        month_range(end_year, last)?.1,
    ))
}

/// Resolves one match against `anchor`.
fn resolve(caps: &Captures<'_>, anchor: Date) -> Option<(Date, Date, Precision)> {
    use Precision::{Day, Month as M, Week, Year};
    let get = |name: &str| caps.name(name).map(|m| m.as_str());
    if get("week_of").is_some() {
        let year = match get("wo_y") {
            Some(y) => y.parse().ok()?,
            None => anchor.year(),
        };
        let (first, last) = month_range(year, month_of(get("wo_m")?)?)?;
        let (s, e) = match get("wo_n")?.to_ascii_lowercase().as_str() {
            "first" => (first, first + Duration::days(6)),
            "second" => (first + Duration::days(7), first + Duration::days(13)),
            "third" => (first + Duration::days(14), first + Duration::days(20)),
            "fourth" => (first + Duration::days(21), first + Duration::days(27)),
            _ => (last - Duration::days(6), last),
        };
        return Some((s, e, Week));
    }
    if get("iso").is_some() {
        let month = time::Month::try_from(get("im")?.parse::<u8>().ok()?).ok()?;
        let d = day(get("iy")?.parse().ok()?, month, get("id")?)?;
        return Some((d, d, Day));
    }
    if get("dmy").is_some() {
        let d = day(get("y1")?.parse().ok()?, month_of(get("m1")?)?, get("d1")?)?;
        return Some((d, d, Day));
    }
    if get("mdy").is_some() {
        let d = day(get("y2")?.parse().ok()?, month_of(get("m2")?)?, get("d2")?)?;
        return Some((d, d, Day));
    }
    if get("my").is_some() {
        let (s, e) = month_range(get("y3")?.parse().ok()?, month_of(get("m3")?)?)?;
        return Some((s, e, M));
    }
    if get("dm").is_some() {
        let d = day(anchor.year(), month_of(get("m4")?)?, get("d4")?)?;
        return Some((d, d, Day));
    }
    if get("md").is_some() {
        let d = day(anchor.year(), month_of(get("m5")?)?, get("d5")?)?;
        return Some((d, d, Day));
    }
    if get("rel_month").is_some() {
        let month = month_of(get("m6")?)?;
        let year = match get("rm_dir")?.to_ascii_lowercase().as_str() {
            "last" if month >= anchor.month() => anchor.year() - 1,
            "next" if month <= anchor.month() => anchor.year() + 1,
            _ => anchor.year(),
        };
        let (s, e) = month_range(year, month)?;
        return Some((s, e, M));
    }
    if get("year").is_some() {
        let (s, e) = year_range(get("y7")?.parse().ok()?)?;
        return Some((s, e, Year));
    }
    if let Some(word) = get("day_word") {
        let offset = match word.to_ascii_lowercase().as_str() {
            "yesterday" | "last night" => -1,
            "tomorrow" => 1,
            _ => 0,
        };
        let d = shifted(anchor, offset)?;
        return Some((d, d, Day));
    }
    if get("ago").is_some() || get("ahead").is_some() {
        let (n, unit, sign) = if get("ago").is_some() {
            (count_of(get("ago_n")?)?, get("ago_u")?, -1)
        } else {
            (count_of(get("ahead_n")?)?, get("ahead_u")?, 1)
        };
        return match unit.to_ascii_lowercase().as_str() {
            "day" => {
                let d = shifted(anchor, sign * n)?;
                Some((d, d, Day))
            }
            "week" => {
                let (s, e) = week_of(shifted(anchor, 7 * sign * n)?)?;
                Some((s, e, Week))
            }
            "month" => {
                let first = shift_months(anchor, sign * n)?;
                let (s, e) = month_range(first.year(), first.month())?;
                Some((s, e, M))
            }
            _ => {
                let (s, e) = year_range(anchor.year() + i32::try_from(sign * n).ok()?)?;
                Some((s, e, Year))
            }
        };
    }
    if get("rel_weekday").is_some() {
        let weekday = weekday_of(get("wd")?)?;
        let d = match get("wd_dir")?.to_ascii_lowercase().as_str() {
            "next" => shifted(anchor, days_to(anchor.weekday(), weekday))?,
            "this" => shifted(
                week_of(anchor)?.0,
                i64::from(weekday.number_days_from_monday()),
            )?,
            _ => shifted(anchor, -days_to(weekday, anchor.weekday()))?,
        };
        return Some((d, d, Day));
    }
    if get("rel_unit").is_some() {
        let step = match get("ru_dir")?.to_ascii_lowercase().as_str() {
            "last" | "past" => -1,
            "next" => 1,
            _ => 0,
        };
        let unit = get("ru")?.to_ascii_lowercase();
        return match unit.as_str() {
            "week" => {
                let (s, e) = week_of(shifted(anchor, 7 * step)?)?;
                Some((s, e, Week))
            }
            "weekend" => {
                let (monday, _) = week_of(shifted(anchor, 7 * step)?)?;
                Some((shifted(monday, 5)?, shifted(monday, 6)?, Week))
            }
            "month" => {
                let first = shift_months(anchor, step)?;
                let (s, e) = month_range(first.year(), first.month())?;
                Some((s, e, M))
            }
            "year" => {
                let (s, e) = year_range(anchor.year() + step as i32)?;
                Some((s, e, Year))
            }
            name => {
                let (s, e) = season(name, anchor.year() + step as i32)?;
                Some((s, e, M))
            }
        };
    }
    None
}

/// Every date phrase in `text`, resolved against `anchor`, in order of appearance.
pub fn mentions(text: &str, anchor: Date) -> Vec<Mention> {
    pattern()
        .captures_iter(text)
        .filter_map(|caps| {
            let whole = caps.get(0)?;
            let (start, end, precision) = resolve(&caps, anchor)?;
            Some(Mention {
                phrase: whole.as_str().to_owned(),
                start,
                end,
                precision,
            })
        })
        .collect()
}

/// The first date found in `text` (an item's `timestamp`: RFC 3339 or any phrase above),
/// resolved against `fallback`; `None` when it names none.
pub fn anchor_of(text: &str, fallback: Date) -> Option<Date> {
    mentions(text, fallback).first().map(|m| m.start)
}

fn asks_when(query: &str) -> bool {
    static WHEN: OnceLock<Regex> = OnceLock::new();
    WHEN.get_or_init(|| {
        Regex::new(r"(?i)\b(when|what (date|day|time|month|year|week)|which (date|day|month|year|week)|how long ago|since when)\b")
            .unwrap_or_else(|e| unreachable!("{e}"))
    })
    .is_match(query)
}

fn asks_duration(query: &str) -> bool {
    static LONG: OnceLock<Regex> = OnceLock::new();
    LONG.get_or_init(|| {
        Regex::new(r"(?i)\bhow (long|many (days|weeks|months|years))\b")
            .unwrap_or_else(|e| unreachable!("{e}"))
    })
    .is_match(query)
}

/// What `query` asks of time, its relative phrases resolved against `now`.
pub fn intent(query: &str, now: Date) -> TemporalIntent {
    if let Some(range) = mentions(query, now).into_iter().next() {
        return TemporalIntent::Range(range);
    }
    if asks_duration(query) {
        return TemporalIntent::Duration;
    }
    if asks_when(query) {
        return TemporalIntent::When;
    }
    TemporalIntent::None
}

#[cfg(test)]
mod tests {
    use time::macros::date;

    use super::*;

    fn first(text: &str, anchor: Date) -> (Date, Date, Precision) {
        let m = mentions(text, anchor);
        assert!(!m.is_empty(), "no mention in {text:?}");
        (m[0].start, m[0].end, m[0].precision)
    }

    #[test]
    fn absolute_dates_resolve_to_their_days_months_and_years() {
        let anchor = date!(2023 - 05 - 08);
        assert_eq!(
            first("on 7 May, 2023 we met", anchor),
            (date!(2023 - 05 - 07), date!(2023 - 05 - 07), Precision::Day)
        );
        assert_eq!(
            first("since September 3, 2022", anchor).0,
            date!(2022 - 09 - 03)
        );
        assert_eq!(
            first("during the last week of August 2023", anchor),
            (
                date!(2023 - 08 - 25),
                date!(2023 - 08 - 31),
                Precision::Week
            )
        );
        assert_eq!(
            first("in August 2023", anchor),
            (
                date!(2023 - 08 - 01),
                date!(2023 - 08 - 31),
                Precision::Month
            )
        );
        assert_eq!(first("2023-01-31", anchor).0, date!(2023 - 01 - 31));
        assert_eq!(
            anchor_of("2023-07-15T10:00:00Z", anchor),
            Some(date!(2023 - 07 - 15))
        );
        assert_eq!(
            anchor_of("1:56 pm on 8 May, 2023", anchor),
            Some(date!(2023 - 05 - 08))
        );
        assert_eq!(
            first("back in 2019 I started", anchor),
            (
                date!(2019 - 01 - 01),
                date!(2019 - 12 - 31),
                Precision::Year
            )
        );
        assert_eq!(first("on the 4th of July", anchor).0, date!(2023 - 07 - 04));
        assert!(mentions("2000 people came", anchor).is_empty());
    }

    #[test]
    fn relative_phrases_resolve_against_the_anchor() {
        let monday = date!(2023 - 05 - 08);
        assert_eq!(first("I went yesterday", monday).0, date!(2023 - 05 - 07));
        assert_eq!(
            first("last week was busy", monday),
            (
                date!(2023 - 05 - 01),
                date!(2023 - 05 - 07),
                Precision::Week
            )
        );
        assert_eq!(first("last Friday", monday).0, date!(2023 - 05 - 05));
        assert_eq!(first("two days ago", monday).0, date!(2023 - 05 - 06));
        assert_eq!(
            first("a few months ago", monday),
            (
                date!(2023 - 02 - 01),
                date!(2023 - 02 - 28),
                Precision::Month
            )
        );
        assert_eq!(
            first("last month", date!(2023 - 01 - 15)).0,
            date!(2022 - 12 - 01)
        );
        assert_eq!(
            first("last weekend", monday),
            (
                date!(2023 - 05 - 06),
                date!(2023 - 05 - 07),
                Precision::Week
            )
        );
        assert_eq!(first("next month", monday).0, date!(2023 - 06 - 01));
        assert_eq!(first("last May", monday).0, date!(2022 - 05 - 01));
        assert_eq!(first("last summer", monday).1, date!(2022 - 08 - 31));
    }

    #[test]
    fn phrases_near_the_ends_of_the_calendar_resolve_to_nothing_instead_of_panicking() {
        for anchor in [date!(9999 - 12 - 31), date!(-9999 - 01 - 01)] {
            for text in [
                "see you tomorrow",
                "yesterday",
                "in 500 weeks",
                "500 weeks ago",
                "this week",
                "next friday",
                "last friday",
                "next weekend",
                "last weekend",
                "next year",
                "in 500 years",
                "500 months ago",
                "next month",
                "last month",
                "this monday",
            ] {
                let _ = mentions(text, anchor);
            }
        }
        assert!(mentions("see you tomorrow", date!(9999 - 12 - 31)).is_empty());
    }

    #[test]
    fn queries_are_classified_by_what_they_ask_of_time() {
        let now = date!(2023 - 11 - 01);
        let window = |query: &str| match intent(query, now) {
            TemporalIntent::Range(m) => (m.start, m.end),
            TemporalIntent::When | TemporalIntent::Duration | TemporalIntent::None => {
                panic!("no range in {query:?}")
            }
        };
        assert_eq!(
            window("What did Sam deal with in October 2023?").0,
            date!(2023 - 10 - 01)
        );
        assert_eq!(window("what happened last week?").1, date!(2023 - 10 - 29));
        assert_eq!(
            intent("When did Caroline go to the support group?", now),
            TemporalIntent::When
        );
        assert_eq!(
            intent("How long did it take Joanna to write her book?", now),
            TemporalIntent::Duration
        );
        assert_eq!(
            intent("Which reactor runs on thorium?", now),
            TemporalIntent::None
        );
    }
}
