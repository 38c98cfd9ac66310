// The rider page's state: what the server said about the ride, the link's token and role,
// and what is on screen. One object, read and written by app.js (messages in) and the views
// (ride/view.js, ride/map-view.js: rendering out).
import { takeToken, claims } from '../socket.js';

// ---- URL: ?ride=… watches a ride; the token moves from the link to sessionStorage ----
export const token = takeToken('rp.token');
const params = new URLSearchParams(location.search);

export function pageUrl(ride) {
  return ride ? '/?ride=' + encodeURIComponent(ride) : '/';
}

// ---- language: browser language first, then the toggle's choice (remembered) ----
function initialLang() {
  let saved = null;
  try { saved = localStorage.getItem('rp.lang'); } catch (e) { /* storage blocked */ }
  if (saved === 'ko' || saved === 'en') return saved;
  const langs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || 'en'];
  for (const l of langs) {
    const p = String(l).toLowerCase().slice(0, 2);
    if (p === 'ko') return 'ko';
    if (p === 'en') return 'en';
  }
  return 'en';
}

export const S = {
  lang: initialLang(),
  // A share link carries a watch-only token (scope "watch"); its holder gets no ride
  // controls. This only shapes the UI: the server enforces what a token may do. The
  // claims give the answer at once; the server's `authenticated` reply confirms it.
  watchOnly: !!(claims(token) && claims(token).scope === 'watch'),
  sock: null,                // the page's RPSocket (app.js makes it)
  ride: params.get('ride') || null,
  conn: 'connecting',        // connecting | online | reconnecting | stopped
  lastLiveAt: 0,             // performance.now() of the last tick/state for our ride
  stale: false,              // no tick for 3 s while the ride should be ticking
  dead: null,                // {hadToken}: the server refused the token (4401); nothing more will come
  reconnected: false,        // say "reconnected" once the ride's numbers are back, not at the socket's open
  busy: null,                // id of the start/pause/resume/end in flight (one at a time)
  subscribed: false,
  subscribeId: null,
  cur: null,                 // last state/tick numbers for the ride
  plan: null,
  receipt: null,
  lastAnnounced: '',
  error: null,               // {code, ride, message} of the shown error, re-rendered on language change
  warning: null,
  share: null,               // {url, status}
  // Where the ride is (issue 28), from state/tick `position` and `distance` and `zone`
  // messages: the track is what this page has seen, the distance is the server's.
  geo: { track: [], position: null, distance: null, zone: null, refused: null, zones: undefined },
};
S.ended = () => !!(S.cur && S.cur.state === 'ended');

export const TRACK_MAX = 5000;      // an hour at one fix a second, and then some
export const STALE_MS = 3000;       // issue: no tick for 3 s -> show "reconnecting"
export const DEAD_MS = 10000;       // still nothing: drop the socket and reconnect
