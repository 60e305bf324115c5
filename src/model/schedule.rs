//! The programme by day, `GET /api/v1/session/getschedule`: a pure function of the activities
//! (`GET /api/v1/session`), so a bundle holds the activities once and both bodies agree.
//!
//! Shaped after the example of the documentation's page programacao.md (`even3dev/apidocs`
//! commit 5772319, tests/fixtures/apidocs/README.md): `{"data": [days], "count": days}`;
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
pub(crate) struct ScheduleBody<'a> {
    pub(crate) days: Vec<Day<'a>>,
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
pub(crate) struct Day<'a> {
    /// `DDMMYYYY`.
    pub(crate) id_schedule: String,
    /// `YYYY-MM-DDT00:00:00.0000000`.
    pub(crate) date: String,
    /// The weekday in Portuguese.
    pub(crate) day: &'static str,
    pub(crate) sessions: Vec<Entry<'a>>,
}

/// One activity at one of its times, within a day.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Entry<'a> {
    pub(crate) id_session: i64,
    pub(crate) title: &'a str,
    pub(crate) title_schedule: &'static str,
    pub(crate) venue: Option<&'a str>,
    pub(crate) description: &'a str,
    pub(crate) tags: Option<&'a str>,
    /// `DD/MM/YYYY`.
    pub(crate) date: String,
    /// The time's date with seven fractional digits.
    #[serde(rename = "date_UTC")]
    pub(crate) date_utc: String,
    pub(crate) start_time: &'a HourMinute,
    pub(crate) end_time: &'a HourMinute,
    pub(crate) speakers: Vec<EntrySpeaker<'a>>,
    pub(crate) all_dates: Vec<AllDate<'a>>,
}

/// A speaker as the schedule shows one: the activity's speaker without `id_event` and
/// `id_session`.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct EntrySpeaker<'a> {
    pub(crate) id_speaker: i64,
    pub(crate) name: &'a str,
    pub(crate) photo: &'a str,
    pub(crate) resume: Option<&'a str>,
    pub(crate) facebook: &'a str,
    pub(crate) linkedin: &'a str,
    pub(crate) email: &'a str,
    pub(crate) lattes: &'a str,
    pub(crate) twitter: &'a str,
    pub(crate) site: &'a str,
}

/// One of the times of an activity, in `all_dates`.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct AllDate<'a> {
    /// The time's date as written (`2020-01-01T00:00:00`).
    pub(crate) date: &'a DateTime,
    pub(crate) day: &'static str,
    pub(crate) start_time: &'a HourMinute,
    pub(crate) end_time: &'a HourMinute,
}

/// The Portuguese name of a weekday, as the service writes it ("quarta-feira").
pub(crate) fn weekday_pt(day: Weekday) -> &'static str {
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
pub(crate) fn schedule(activities: &[Activity]) -> ScheduleBody<'_> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::bodies::sessions_body;
    use crate::model::decode::Diag;
    use serde_json::{json, Map, Value};

    const SESSION: &str = include_str!("../../tests/fixtures/apidocs/programacao-session.json");
    const SCHEDULE: &str =
        include_str!("../../tests/fixtures/apidocs/programacao-getschedule.json");

    fn parse(text: &str) -> Value {
        serde_json::from_str(text).expect("the fixture is JSON")
    }

    /// The activities of a `/session` body, decoded with no finding.
    fn activities(v: &Value) -> Vec<Activity> {
        let mut diag = Diag::default();
        let body = sessions_body(v, &mut diag);
        assert!(diag.findings.is_empty(), "{:?}", diag.lines());
        body.expect("the activities decode").data
    }

    fn served(activities: &[Activity]) -> Value {
        serde_json::to_value(schedule(activities)).expect("serialises")
    }

    /// The activities the documented schedule shows, as `/session` would list them: the fields
    /// the schedule leaves out (`id_event`, `credit_hour`, `capacity`, `ticket_price`, `type`,
    /// `id_time`) as in the documented activity, an empty description where it shows " ", each
    /// time from `all_dates`. Listed in reverse, so the order must come from the times.
    fn activities_of_schedule(schedule: &Value) -> Value {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let sessions = schedule["data"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|day| day["sessions"].as_array().into_iter().flatten());
        for s in sessions {
            let id = s["id_session"].clone();
            if !seen.insert(id.to_string()) {
                continue;
            }
            let speakers: Vec<Value> = s["speakers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|sp| {
                    let mut m = Map::new();
                    m.insert("id_event".into(), json!(37524));
                    m.insert("id_speaker".into(), sp["id_speaker"].clone());
                    m.insert("id_session".into(), id.clone());
                    for (k, v) in sp.as_object().into_iter().flatten().skip(1) {
                        m.insert(k.clone(), v.clone());
                    }
                    Value::Object(m)
                })
                .collect();
            let times: Vec<Value> = s["all_dates"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, d)| {
                    json!({"id_event": 37524, "id_session": id, "id_time": 534771 + i,
                        "date": d["date"], "start_time": d["start_time"],
                        "end_time": d["end_time"]})
                })
                .collect();
            let description = match s["description"].as_str() {
                Some(" ") => json!(""),
                _ => s["description"].clone(),
            };
            out.push(
                json!({"id_session": id, "id_event": 37524, "title": s["title"],
                "description": description, "credit_hour": "1", "capacity": 50,
                "ticket_price": parse("10.0000"), "type": "Conferência", "venue": s["venue"],
                "tags": s["tags"], "speakers": speakers, "times": times}),
            );
        }
        out.reverse();
        json!({ "data": out })
    }

    #[test]
    fn the_documented_activity_gives_its_entry_of_the_documented_schedule() {
        let documented = parse(SCHEDULE);
        let mut day = documented["data"][0].clone();
        day["sessions"] = json!([documented["data"][0]["sessions"][0].clone()]);
        assert_eq!(day["sessions"][0]["id_session"], json!(155553));

        let got = served(&activities(&parse(SESSION)));

        assert_eq!(
            got.to_string(),
            json!({"data": [day], "count": 1}).to_string()
        );
    }

    #[test]
    fn the_documented_schedule_is_rebuilt_from_the_activities_it_shows() {
        let documented = parse(SCHEDULE);
        let activities = activities(&activities_of_schedule(&documented));
        assert_eq!(activities.len(), 10, "155571 is held on both days");

        let got = served(&activities);

        assert_eq!(got.to_string(), documented.to_string());
    }

    fn activity(id: i64, description: &str, times: &[(&str, &str, &str)]) -> Value {
        let times: Vec<Value> = times
            .iter()
            .enumerate()
            .map(|(i, (date, start, end))| {
                json!({"id_event": 1, "id_session": id, "id_time": i, "date": date,
                    "start_time": start, "end_time": end})
            })
            .collect();
        json!({"id_session": id, "id_event": 1, "title": format!("A{id}"),
            "description": description, "credit_hour": "1", "capacity": 1, "ticket_price": 0,
            "type": "Palestra", "venue": null, "tags": null, "speakers": [], "times": times})
    }

    #[test]
    fn days_in_date_order_entries_by_hour_and_one_per_time() {
        let v = json!([
            activity(1, "", &[("2020-01-01T00:00:00", "14:00", "15:00")]),
            activity(
                2,
                "x",
                &[
                    ("2019-12-31T00:00:00", "09:00", "10:00"),
                    ("2020-01-01T00:00:00", "16:00", "17:00"),
                    ("2020-01-01T00:00:00", "08:00", "09:00")
                ]
            ),
            activity(3, " ", &[]),
            activity(4, "", &[("2020-01-01T00:00:00", "08:00", "08:30")]),
        ]);
        let acts = activities(&v);

        let got = served(&acts);

        let days: Vec<(&Value, &Value, &Value)> = got["data"]
            .as_array()
            .expect("days")
            .iter()
            .map(|d| (&d["id_schedule"], &d["date"], &d["day"]))
            .collect();
        assert_eq!(
            days,
            [
                (
                    &json!("31122019"),
                    &json!("2019-12-31T00:00:00.0000000"),
                    &json!("terça-feira")
                ),
                (
                    &json!("01012020"),
                    &json!("2020-01-01T00:00:00.0000000"),
                    &json!("quarta-feira")
                ),
            ]
        );
        assert_eq!(got["count"], json!(2));
        let day2: Vec<(i64, &str, &str)> = got["data"][1]["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .map(|s| {
                (
                    s["id_session"].as_i64().unwrap_or(-1),
                    s["start_time"].as_str().unwrap_or(""),
                    s["description"].as_str().unwrap_or("?"),
                )
            })
            .collect();
        assert_eq!(
            day2,
            [
                (4, "08:00", " "),
                (2, "08:00", "x"),
                (1, "14:00", " "),
                (2, "16:00", "x")
            ],
            "by start, then end; activity 2 twice on its day; none for activity 3"
        );
        let all: Vec<(&Value, &Value)> = got["data"][1]["sessions"][1]["all_dates"]
            .as_array()
            .expect("all_dates")
            .iter()
            .map(|d| (&d["date"], &d["start_time"]))
            .collect();
        assert_eq!(
            all,
            [
                (&json!("2019-12-31T00:00:00"), &json!("09:00")),
                (&json!("2020-01-01T00:00:00"), &json!("08:00")),
                (&json!("2020-01-01T00:00:00"), &json!("16:00")),
            ]
        );
        assert_eq!(got["data"][0]["sessions"][0]["date"], json!("31/12/2019"));
    }

    #[test]
    fn weekdays_are_named_in_portuguese() {
        let times: Vec<(String, &str, &str)> = (5..=11)
            .map(|d| (format!("2020-01-{d:02}T00:00:00"), "10:00", "11:00"))
            .collect();
        let times: Vec<(&str, &str, &str)> =
            times.iter().map(|(d, s, e)| (d.as_str(), *s, *e)).collect();
        let acts = activities(&json!([activity(1, "", &times)]));

        let got = served(&acts);

        let names: Vec<&str> = got["data"]
            .as_array()
            .expect("days")
            .iter()
            .map(|d| d["day"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            names,
            [
                "domingo",
                "segunda-feira",
                "terça-feira",
                "quarta-feira",
                "quinta-feira",
                "sexta-feira",
                "sábado"
            ]
        );
    }

    #[test]
    fn no_activities_no_days() {
        assert_eq!(served(&[]).to_string(), r#"{"data":[],"count":0}"#);
    }
}
