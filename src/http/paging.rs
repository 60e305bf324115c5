//! `?page=N&per_page=M` on a list: client authors observed the service paging `/attendees` so.
//! Names match ignoring ASCII case, as the service's framework binds them.

use crate::errors::ApiError;

/// The page size when `page` comes without `per_page`.
pub(crate) const DEFAULT_PER_PAGE: usize = 100;

/// The page asked for, `(page, per_page)` counted from 1; `None` when neither is given (the whole
/// list). A value that is not a whole number from 1, or a name given twice with different
/// values (which one the client meant is not known), is [`ApiError::InvalidPaging`].
pub(crate) fn paging(query: Option<&str>) -> Result<Option<(usize, usize)>, ApiError> {
    let Some(query) = query else { return Ok(None) };
    let (mut page, mut per_page) = (None, None);
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        let slot = if k.eq_ignore_ascii_case("page") {
            &mut page
        } else if k.eq_ignore_ascii_case("per_page") {
            &mut per_page
        } else {
            continue;
        };
        // A whole number too large for this machine is as good as "all": it saturates.
        let n = whole_number(v.trim()).map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
        if n < 1 || slot.is_some_and(|m| m != n) {
            return Err(ApiError::InvalidPaging);
        }
        *slot = Some(n);
    }
    Ok(match (page, per_page) {
        (None, None) => None,
        (page, per_page) => Some((page.unwrap_or(1), per_page.unwrap_or(DEFAULT_PER_PAGE))),
    })
}

/// The whole number `text` writes in ASCII digits (nothing else), saturating at `u64::MAX`.
pub(crate) fn whole_number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse::<u64>().unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_count_from_one_and_default_sensibly() {
        assert_eq!(paging(None), Ok(None));
        assert_eq!(paging(Some("x=1")), Ok(None));
        assert_eq!(paging(Some("page=2&per_page=10")), Ok(Some((2, 10))));
        assert_eq!(paging(Some("PAGE=3")), Ok(Some((3, DEFAULT_PER_PAGE))));
        assert_eq!(paging(Some("per_page=5")), Ok(Some((1, 5))));
        assert_eq!(
            paging(Some("page=2&Page=2")),
            Ok(Some((2, DEFAULT_PER_PAGE)))
        );
        assert_eq!(
            paging(Some("page=98870736201005858816")),
            Ok(Some((usize::MAX, DEFAULT_PER_PAGE)))
        );
        for bad in [
            "page=0",
            "page=-1",
            "per_page=x",
            "page=",
            "page=1.5",
            "page=1&page=2",
            "per_page=5&PER_PAGE=6",
        ] {
            assert_eq!(paging(Some(bad)), Err(ApiError::InvalidPaging), "{bad}");
        }
    }
}
