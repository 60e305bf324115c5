//! The programme by day, `GET /api/v1/session/getschedule`: a pure function of the activities
//! (`GET /api/v1/session`), so a bundle holds the activities once and both bodies agree.
//!
//! Shaped after programacao.md's example (apidocs 5772319): `{"data": [days], "count": days}`;
//! a day is `id_schedule` (`DDMMYYYY`), `date` (midnight, seven fractional digits), `day` (the
//! Portuguese weekday, "quarta-feira") and its `sessions`; an entry is the activity's
//! `id_session`, `title`, `title_schedule` (always "Atividades"), `venue`, `description` (`" "`
//! when empty, as the example writes it), `tags`, `date` (`DD/MM/YYYY`), `date_UTC` (the time's
//! date with seven fractional digits), `start_time`, `end_time`, its `speakers` without
//! `id_event` and `id_session`, and `all_dates`: every time of the activity, in date order.
//!
//! Choices where the documentation is silent:
//! - one entry per *time*: an activity held on two days is listed under both; one with two times
//!   on the same day is listed twice that day, each with its own hours (the service is seen to
//!   repeat an activity within a day; clients de-duplicate by `id_session`);
//! - days in date order; a day's entries by start time, then end time, then file order;
//! - an activity without times is in no day; no activities give `{"data": [], "count": 0}`;
//! - fields a file adds to an activity or a speaker are served by `/session`, not here.

use chrono::{Datelike, NaiveDate, NaiveDateTime, Weekday};
use serde::ser::{Serialize, SerializeMap, Serializer};

use super::formats::{DateTime, HourMinute};
use super::records::{Activity, SessionSpeaker, SessionTime};

/// The body of `GET /api/v1/session/getschedule`, borrowing from the activities.
#[derive(Debug, Clone)]
pub struct ScheduleBody<'a> {
    pub days: Vec<Day<'a>>,
}

impl Serialize for ScheduleBody<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("data", &self.days)?;
        m.serialize_entry("count", &self.days.len())?;
        m.end()
    }
}

/// One day of the programme.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Day<'a> {
    /// `DDMMYYYY`.
    pub id_schedule: String,
    /// `YYYY-MM-DDT00:00:00.0000000`.
    pub date: String,
    /// The weekday in Portuguese.
    pub day: &'static str,
    pub sessions: Vec<Entry<'a>>,
}

/// One activity at one of its times, within a day.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Entry<'a> {
    pub id_session: i64,
    pub title: &'a str,
    pub title_schedule: &'static str,
    pub venue: Option<&'a str>,
    pub description: &'a str,
    pub tags: Option<&'a str>,
    /// `DD/MM/YYYY`.
    pub date: String,
    /// The time's date with seven fractional digits.
    #[serde(rename = "date_UTC")]
    pub date_utc: String,
    pub start_time: &'a HourMinute,
    pub end_time: &'a HourMinute,
    pub speakers: Vec<EntrySpeaker<'a>>,
    pub all_dates: Vec<AllDate<'a>>,
}

/// A speaker as the schedule shows one: the activity's speaker without `id_event` and
/// `id_session`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EntrySpeaker<'a> {
    pub id_speaker: i64,
    pub name: &'a str,
    pub photo: &'a str,
    pub resume: Option<&'a str>,
    pub facebook: &'a str,
    pub linkedin: &'a str,
    pub email: &'a str,
    pub lattes: &'a str,
    pub twitter: &'a str,
    pub site: &'a str,
}

/// One of the times of an activity, in `all_dates`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AllDate<'a> {
    /// The time's date as written (`2020-01-01T00:00:00`).
    pub date: &'a DateTime,
    pub day: &'static str,
    pub start_time: &'a HourMinute,
    pub end_time: &'a HourMinute,
}

/// The Portuguese name of a weekday, as the service writes it ("quarta-feira").
pub fn weekday_pt(day: Weekday) -> &'static str {
    match day {
        Weekday::Mon => "segunda-feira",
        Weekday::Tue => "terça-feira",
        Weekday::Wed => "quarta-feira",
        Weekday::Thu => "quinta-feira",
        Weekday::Fri => "sexta-feira",
        Weekday::Sat => "sábado",
        Weekday::Sun => "domingo",
    }
}

/// The calendar date of a time. Its `date` was validated when decoded, so it always parses.
fn date_of(t: &SessionTime) -> Option<NaiveDate> {
    NaiveDateTime::parse_from_str(t.date.as_str(), "%Y-%m-%dT%H:%M:%S")
        .ok()
        .map(|d| d.date())
}

/// The schedule of `activities`: see the module's documentation for its shape and order.
pub fn schedule(activities: &[Activity]) -> ScheduleBody<'_> {
    // Every (day, activity, time), in file order, then sorted (stably) by day and hours.
    let mut slots: Vec<(NaiveDate, &Activity, &SessionTime)> = activities
        .iter()
        .flat_map(|a| a.times.iter().map(move |t| (a, t)))
        .filter_map(|(a, t)| Some((date_of(t)?, a, t)))
        .collect();
    slots.sort_by(|x, y| {
        (x.0, x.2.start_time.as_str(), x.2.end_time.as_str()).cmp(&(
            y.0,
            y.2.start_time.as_str(),
            y.2.end_time.as_str(),
        ))
    });
    let mut days: Vec<Day<'_>> = Vec::new();
    let mut current: Option<NaiveDate> = None;
    for (date, activity, time) in slots {
        if current != Some(date) {
            current = Some(date);
            days.push(Day {
                id_schedule: date.format("%d%m%Y").to_string(),
                date: date.format("%Y-%m-%dT00:00:00.0000000").to_string(),
                day: weekday_pt(date.weekday()),
                sessions: Vec::new(),
            });
        }
        if let Some(day) = days.last_mut() {
            day.sessions.push(entry(activity, time, date));
        }
    }
    ScheduleBody { days }
}

/// The entry of `activity` at `time`, on `date`.
fn entry<'a>(activity: &'a Activity, time: &'a SessionTime, date: NaiveDate) -> Entry<'a> {
    let description = if activity.description.trim().is_empty() {
        " "
    } else {
        activity.description.as_str()
    };
    Entry {
        id_session: activity.id_session,
        title: &activity.title,
        title_schedule: "Atividades",
        venue: activity.venue.as_deref(),
        description,
        tags: activity.tags.as_deref(),
        date: date.format("%d/%m/%Y").to_string(),
        date_utc: format!("{}.0000000", time.date.as_str()),
        start_time: &time.start_time,
        end_time: &time.end_time,
        speakers: activity.speakers.iter().map(entry_speaker).collect(),
        all_dates: all_dates(activity),
    }
}

fn entry_speaker(s: &SessionSpeaker) -> EntrySpeaker<'_> {
    EntrySpeaker {
        id_speaker: s.id_speaker,
        name: &s.name,
        photo: &s.photo,
        resume: s.resume.as_deref(),
        facebook: &s.facebook,
        linkedin: &s.linkedin,
        email: &s.email,
        lattes: &s.lattes,
        twitter: &s.twitter,
        site: &s.site,
    }
}

/// Every time of `activity`, by date and start time.
fn all_dates(activity: &Activity) -> Vec<AllDate<'_>> {
    let mut times: Vec<(NaiveDate, &SessionTime)> = activity
        .times
        .iter()
        .filter_map(|t| Some((date_of(t)?, t)))
        .collect();
    times.sort_by(|x, y| (x.0, x.1.start_time.as_str()).cmp(&(y.0, y.1.start_time.as_str())));
    times
        .into_iter()
        .map(|(date, t)| AllDate {
            date: &t.date,
            day: weekday_pt(date.weekday()),
            start_time: &t.start_time,
            end_time: &t.end_time,
        })
        .collect()
}
