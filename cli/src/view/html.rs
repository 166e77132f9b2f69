//! Drawing a [`Timeline`] as a self-contained HTML page: the rows, their bars and cancel
//! markers, the notes on what was skipped, and the inline style and filter script.

use std::fmt::Write as _;

use super::Timeline;
use crate::Dir;

/// Escapes `text` for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

const STYLE: &str = "
body { font: 13px/1.4 system-ui, sans-serif; margin: 1em; color: #222; }
h1 { font-size: 16px; margin: 0 0 .5em; }
.notes p { margin: .2em 0; color: #8a5a00; }
#filter { margin: .5em 0 1em; padding: 3px 6px; width: 24em; }
.legend span { margin-right: 1.5em; }
.legend i { display: inline-block; width: 2em; height: .8em; margin-right: .4em; vertical-align: middle; }
.row { display: flex; align-items: center; border-bottom: 1px solid #eee; min-height: 22px; }
.label { width: 26em; flex: none; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
.label .id, .label .dir { color: #777; }
.track { position: relative; flex: 1; height: 14px; background: #fafafa; }
.bar { position: absolute; top: 2px; height: 10px; min-width: 2px; background: #4a7bd0; border-radius: 2px; }
.bar.late { background: #e0862b; }
.bar.open { background: repeating-linear-gradient(45deg, #9ab, #9ab 4px, #cde 4px, #cde 8px); }
.cancel { position: absolute; top: -2px; width: 3px; height: 18px; margin-left: -1px; background: #c62828; }
.info { width: 22em; flex: none; padding-left: 1em; color: #555; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
";

const SCRIPT: &str = "
(function () {
  var filter = document.getElementById('filter');
  var rows = document.querySelectorAll('.row');
  var drawn = 0;
  for (var i = 0; i < rows.length; i++) {
    var track = rows[i].querySelector('.track').getBoundingClientRect();
    var marks = rows[i].querySelectorAll('.bar, .cancel');
    var ok = marks.length > 0 && track.width > 0;
    for (var j = 0; j < marks.length; j++) {
      var r = marks[j].getBoundingClientRect();
      if (r.width > 0 && r.height > 0 && r.left >= track.left - 3 && r.right <= track.right + 3) {
        marks[j].setAttribute('data-x', String(Math.round(r.left - track.left)));
      } else {
        ok = false;
      }
    }
    if (ok) {
      rows[i].setAttribute('data-drawn', '1');
      drawn++;
    }
  }
  function apply() {
    var q = filter.value.toLowerCase();
    var shown = 0;
    for (var i = 0; i < rows.length; i++) {
      var m = (rows[i].getAttribute('data-method') || '').toLowerCase();
      var show = m.indexOf(q) >= 0;
      rows[i].style.display = show ? '' : 'none';
      if (show) shown++;
    }
    document.body.setAttribute('data-shown', String(shown));
  }
  filter.addEventListener('input', function () {
    apply();
    try {
      history.replaceState(null, '', filter.value
        ? '#filter=' + encodeURIComponent(filter.value)
        : location.pathname + location.search);
    } catch (e) {}
  });
  var preset = /(?:^#|&)filter=([^&]*)/.exec(location.hash);
  if (preset) {
    try {
      filter.value = decodeURIComponent(preset[1]);
    } catch (e) {
      filter.value = preset[1];
    }
  }
  apply();
  document.body.setAttribute('data-drawn', String(drawn));
})();
";

/// Renders `timeline` as a self-contained HTML page (inline CSS and JavaScript, nothing fetched)
/// titled after `title`, usually the trace's file name.
pub fn render(timeline: &Timeline, title: &str) -> String {
    let end = timeline.end_us.max(1) as f64;
    let pct = |us: u64| us as f64 * 100.0 / end;
    let mut html = String::new();
    let title = escape(title);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>cancelkit trace: {title}</title><style>{STYLE}</style></head><body>\n\
         <h1>cancelkit trace: {title}</h1>\n<p>{} requests over {}</p>\n",
        timeline.rows.len() as u64 + timeline.rows_not_shown,
        ms(timeline.end_us),
    );
    let mut notes = Vec::new();
    if timeline.rows_not_shown > 0 {
        notes.push(format!(
            "Truncated: only the first {} requests are drawn; {} more are not shown.",
            timeline.rows.len(),
            timeline.rows_not_shown
        ));
    }
    if timeline.malformed > 0 {
        notes.push(format!(
            "{} malformed lines in the trace file were skipped.",
            timeline.malformed
        ));
    }
    if timeline.dropped > 0 {
        notes.push(format!(
            "The recorder fell behind and dropped {} chunks: some frames are missing.",
            timeline.dropped
        ));
    }
    if timeline.not_json_rpc > 0 {
        notes.push(format!(
            "{} frames were not JSON-RPC messages.",
            timeline.not_json_rpc
        ));
    }
    if timeline.unmatched_responses > 0 {
        notes.push(format!(
            "{} responses matched no request.",
            timeline.unmatched_responses
        ));
    }
    if timeline.unmatched_cancels > 0 {
        notes.push(format!(
            "{} cancels named no known request.",
            timeline.unmatched_cancels
        ));
    }
    html.push_str("<div class=\"notes\">");
    for note in notes {
        let _ = write!(html, "<p class=\"note\">{}</p>", escape(&note));
    }
    html.push_str("</div>\n");
    html.push_str(
        "<div class=\"legend\"><span><i class=\"bar-key\" style=\"background:#4a7bd0\"></i>answered</span>\
         <span><i style=\"background:#e0862b\"></i>answered after a cancel</span>\
         <span><i style=\"background:#9ab\"></i>never answered</span>\
         <span><i style=\"background:#c62828;width:3px\"></i>cancel</span></div>\n",
    );
    html.push_str(
        "<input id=\"filter\" type=\"search\" placeholder=\"filter by method\" \
         aria-label=\"filter by method\">\n<div class=\"rows\">\n",
    );
    for row in &timeline.rows {
        let method = escape(&row.method);
        let id = escape(&row.id);
        let (dir, arrow) = match row.dir {
            Dir::In => ("in", "client → server"),
            Dir::Out => ("out", "server → client"),
        };
        let stop = row.response.as_ref().map_or(timeline.end_us, |r| r.t_us);
        let class = match &row.response {
            None => "bar open",
            Some(_) if row.is_late() => "bar late",
            Some(_) => "bar",
        };
        let outcome = match &row.response {
            None => "no response".to_owned(),
            Some(r) if r.is_error => format!("error after {}", ms(r.t_us - row.start_us)),
            Some(r) => format!("answered after {}", ms(r.t_us - row.start_us)),
        };
        let _ = write!(
            html,
            "<div class=\"row\" data-method=\"{method}\" data-id=\"{id}\" data-dir=\"{dir}\">\
             <div class=\"label\" title=\"{method} {id}\"><span class=\"method\">{method}</span> \
             <span class=\"id\">id {id}</span> <span class=\"dir\">{arrow}</span></div>\
             <div class=\"track\"><div class=\"{class}\" style=\"left:{:.4}%;width:{:.4}%\" \
             title=\"{method} {id}: {outcome}\"></div>",
            pct(row.start_us),
            pct(stop.saturating_sub(row.start_us)),
        );
        let mut info = vec![outcome];
        for cancel in &row.cancels {
            let latency = match &row.response {
                Some(r) if r.t_us >= cancel.t_us => {
                    format!("response {} after the cancel", ms(r.t_us - cancel.t_us))
                }
                Some(_) => "sent after the response".to_owned(),
                None => format!(
                    "no response ({} to the end of the trace)",
                    ms(timeline.end_us.saturating_sub(cancel.t_us))
                ),
            };
            let text = escape(&format!(
                "{} at {}: {latency}",
                cancel.method,
                ms(cancel.t_us)
            ));
            let _ = write!(
                html,
                "<div class=\"cancel\" style=\"left:{:.4}%\" title=\"{text}\"></div>",
                pct(cancel.t_us)
            );
            info.push(format!("cancel: {latency}"));
        }
        let info = escape(&info.join("; "));
        let _ = writeln!(
            html,
            "</div><div class=\"info\" title=\"{info}\">{info}</div></div>"
        );
    }
    let _ = write!(html, "</div>\n<script>{SCRIPT}</script>\n</body></html>\n");
    html
}
