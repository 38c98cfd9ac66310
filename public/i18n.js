// Texts and formatting for Korean and English. Numbers, money and times go through Intl;
// the page only formats what the server sent (it never computes a fare). An ES module, imported
// by both pages' modules.

const T = {
  ko: {
    'lang.other': 'English',
    'conn.connecting': '연결 중…',
    'conn.online': '실시간',
    'conn.reconnecting': '다시 연결 중…',
    'conn.stopped': '연결 끊김',
    'start.title': '킥보드 대여',
    'start.lead': '버튼을 누르면 바로 이용이 시작됩니다.',
    'btn.start': '대여하기',
    'btn.pause': '일시정지',
    'btn.resume': '다시 시작',
    'btn.end': '반납하기',
    'btn.share': '공유 링크 복사',
    'btn.new': '새로 대여하기',
    'btn.dismiss': '닫기',
    'ride.title': '킥보드 이용',
    'ride.id': '라이드',
    'ride.elapsed': '이용 시간',
    'ride.fare': '결제 금액',
    'ride.remaining': '남은 이용 시간',
    'state.riding': '이용 중',
    'state.paused': '일시정지',
    'state.ended': '반납 완료',
    'status.riding': '이용 중입니다.',
    'status.paused': '일시정지되었습니다.',
    'status.ended': '반납이 완료되었습니다.',
    'status.reconnecting': '연결이 끊겼습니다. 다시 연결하는 중입니다. 표시된 시간은 마지막으로 받은 값입니다.',
    'status.online': '다시 연결되었습니다.',
    'rate.base': '잠금 해제 {price}',
    'rate.per': '분당 {rate}',
    'rate.perN': '{n}분당 {rate}',
    'rate.once': '{rate}',
    'rate.from': '{start}분부터 ',
    'warning': '{t} 후 자동으로 반납됩니다.',
    'receipt.title': '영수증',
    'receipt.total': '합계',
    'receipt.unlock': '잠금 해제',
    'receipt.riding': '주행 {n}분',
    'receipt.pause': '일시정지 요금 (과금 {n}분)',
    'receipt.riding_for': '이용 {elapsed} (과금)',
    'receipt.riding_free': '이용 {elapsed} (요금 없음)',
    'receipt.paused_billed': '일시정지 {paused} (과금)',
    'receipt.paused_free': '일시정지 {paused} (요금 없음)',
    'paused.for': '일시정지 {t}째',
    'paused.free': '일시정지 중에는 요금이 붙지 않습니다',
    'paused.billed': '일시정지 중에도 분당 {rate}',
    'ride.watch_only': '공유받은 라이드를 보고 있습니다 (보기 전용).',
    'dead.title': '이 링크는 더 이상 작동하지 않습니다.',
    'dead.text': '서버가 이 링크의 토큰을 받지 않습니다 (만료되었거나, 서버가 새 비밀 키로 다시 시작되었습니다). 회색 시간과 요금은 마지막으로 받은 값이며 더 이상 바뀌지 않지만, 라이드는 서버에서 계속 과금될 수 있습니다. 새 링크를 여세요: 서버가 새로 출력한 주소(…/?token=…)나 앱에서 받은 링크입니다.',
    'dead.text.watch': '공유 링크의 토큰이 만료되었거나 서버가 다시 시작되었습니다. 회색 시간과 요금은 마지막으로 받은 값이며 더 이상 바뀌지 않습니다. 라이더에게 새 공유 링크를 요청하세요.',
    'dead.text.ended': '라이드는 끝났고 영수증은 최종 값입니다. 새로 대여하려면 새 링크를 여세요.',
    'notice.token.title': '들어가려면 토큰이 담긴 링크가 필요합니다',
    'notice.token.text': '이 서버는 토큰이 담긴 링크로만 열립니다. 서버를 시작한 터미널에 출력된 주소(http://…/?token=…)를 그대로 여세요. 다른 사람의 라이드를 보려면 그 사람에게 공유 링크를 받으세요.',
    'notice.dead.title': '이 링크는 더 이상 작동하지 않습니다',
    'notice.dead.text': '서버가 이 링크의 토큰을 받지 않습니다 (만료되었거나, 서버가 새 비밀 키로 다시 시작되었습니다). 서버가 새로 출력한 주소(…/?token=…)나 새 공유 링크를 여세요.',
    'notice.watch.title': '보기 전용 링크입니다',
    'notice.watch.text': '이 링크로는 공유받은 라이드를 볼 수만 있고 대여할 수는 없습니다. 대여하려면 본인의 링크(…/?token=…)로 여세요.',
    'notice.watch-notfound.title': '공유받은 라이드를 찾을 수 없습니다',
    'notice.watch-notfound.text': '라이드 {ride}가 서버에 없습니다. 라이더에게 새 공유 링크를 요청하세요. 이 링크로는 대여할 수 없습니다.',
    'notice.forbidden.title': '다른 라이더의 라이드입니다',
    'notice.forbidden.text': '라이드 {ride}는 이 링크로 볼 수 없습니다. 보려면 그 라이더에게 공유 링크를 받으세요. 본인의 라이드라면 본인의 링크로 여세요.',
    'notice.forbidden.text.watch': '라이드 {ride}는 이 공유 링크로 볼 수 없습니다. 보려면 그 라이더에게 이 라이드의 공유 링크를 받으세요.',
    'receipt.cap': '요금 상한 할인',
    'receipt.floor': '할인 한도 조정',
    'receipt.distance': '주행 거리 {km}km',
    'rate.pause': '일시정지 분당 {rate}',
    'rate.cap': '{duration}분 최대 {price}',
    'receipt.reason.rider': '직접 반납했습니다.',
    'receipt.reason.operator': '운영자가 반납 처리했습니다.',
    'receipt.reason.operator_forced': '반납할 수 없는 구역이었지만 운영자가 반납 처리했습니다.',
    'receipt.reason.time_limit': '이용 시간 한도에 도달해 자동으로 반납되었습니다.',
    'receipt.reason.pause_limit': '일시정지 한도를 넘어 자동으로 반납되었습니다.',
    'receipt.span': '{start} ~ {end}',
    'share.copied': '복사됨',
    'share.manual': '아래 링크를 복사하세요',
    'share.label': '공유 링크',
    'err.bad_request': '요청 형식이 올바르지 않습니다.',
    'err.unknown_type': '서버가 이 기능을 지원하지 않습니다.',
    'err.ride_not_found': '라이드를 찾을 수 없습니다: {ride}',
    'err.invalid_transition': '지금은 할 수 없는 작업입니다. 라이드 상태가 이미 바뀌었을 수 있습니다.',
    'err.conflict': '이미 있는 라이드입니다: {ride}',
    'err.too_large': '요청이 너무 큽니다.',
    'err.unavailable': '서버를 잠시 사용할 수 없습니다. 잠시 후 다시 시도해 주세요.',
    'err.unauthorized': '인증이 필요합니다. 링크가 만료되었을 수 있습니다.',
    'err.forbidden': '이 라이드에 대한 권한이 없습니다.',
    'err.rate_limited': '요청이 너무 많습니다. 잠시 후 다시 시도해 주세요.',
    'err.other': '오류가 발생했습니다.',
    'err.end_not_allowed': '반납할 수 없는 구역입니다',
    'err.start_not_allowed': '대여를 시작할 수 없는 구역입니다',
    'err.position_required': '현재 위치를 확인할 수 없습니다. 잠시 후 다시 반납해 주세요.',
    'map.label': '라이드 경로 지도',
    'map.distance': '이동 거리 {d}',
    'map.zone': '현재 구역: {zone}',
    'map.refused': '반납할 수 없는 구역입니다',
    'map.kind.nogo': '통행 금지',
    'map.kind.noparking': '반납 금지',
    'map.kind.slow': '속도 제한',
    'map.kind.allowed': '운행 구역',
  },
  en: {
    'lang.other': '한국어',
    'conn.connecting': 'Connecting…',
    'conn.online': 'Live',
    'conn.reconnecting': 'Reconnecting…',
    'conn.stopped': 'Disconnected',
    'start.title': 'Rent a scooter',
    'start.lead': 'Your ride starts as soon as you tap the button.',
    'btn.start': 'Rent',
    'btn.pause': 'Pause',
    'btn.resume': 'Resume',
    'btn.end': 'Return',
    'btn.share': 'Copy share link',
    'btn.new': 'Rent again',
    'btn.dismiss': 'Dismiss',
    'ride.title': 'Scooter ride',
    'ride.id': 'Ride',
    'ride.elapsed': 'Ride time',
    'ride.fare': 'Fare',
    'ride.remaining': 'Time left',
    'state.riding': 'Riding',
    'state.paused': 'Paused',
    'state.ended': 'Returned',
    'status.riding': 'Ride in progress.',
    'status.paused': 'Ride paused.',
    'status.ended': 'Ride returned.',
    'status.reconnecting': 'Connection lost. Reconnecting; the time shown is the last one received.',
    'status.online': 'Reconnected.',
    'rate.base': '{price} to unlock',
    'rate.per': '{rate}/min',
    'rate.perN': '{rate} per {n} min',
    'rate.once': '{rate}',
    'rate.from': 'from min {start}: ',
    'warning': 'The ride ends automatically in {t}.',
    'receipt.title': 'Receipt',
    'receipt.total': 'Total',
    'receipt.unlock': 'Unlock',
    'receipt.riding': 'Riding {n} min',
    'receipt.pause': 'Pause charge ({n} min billed)',
    'receipt.riding_for': 'riding {elapsed} (billed)',
    'receipt.riding_free': 'riding {elapsed} (not billed)',
    'receipt.paused_billed': 'paused {paused} (billed)',
    'receipt.paused_free': 'paused {paused} (not billed)',
    'paused.for': 'Paused for {t}',
    'paused.free': 'a pause is not billed',
    'paused.billed': 'billed {rate}/min while paused',
    'ride.watch_only': 'You are watching a shared ride (view only).',
    'dead.title': 'This link no longer works.',
    'dead.text': 'The server refuses this link\'s token (it expired, or the server restarted with a new secret). The grey time and fare are the last ones received and no longer change, but the ride may still be billed on the server. Open a new link: the address the server printed again (…/?token=…) or the one from your app.',
    'dead.text.watch': 'The share link\'s token expired or the server restarted. The grey time and fare are the last ones received and no longer change. Ask the rider for a new share link.',
    'dead.text.ended': 'The ride has ended and the receipt is final. Open a new link to rent again.',
    'notice.token.title': 'You need a link with a token',
    'notice.token.text': 'This server opens only with a link that carries a token. Open the address printed in the terminal that started the server (http://…/?token=…) as it is. To watch someone\'s ride, ask them for a share link.',
    'notice.dead.title': 'This link no longer works',
    'notice.dead.text': 'The server refuses this link\'s token (it expired, or the server restarted with a new secret). Open the address the server printed again (…/?token=…) or a new share link.',
    'notice.watch.title': 'This is a view-only link',
    'notice.watch.text': 'This link can only watch the ride that was shared; it cannot rent. To rent, open your own link (…/?token=…).',
    'notice.watch-notfound.title': 'The shared ride was not found',
    'notice.watch-notfound.text': 'Ride {ride} is not on the server. Ask the rider for a new share link. This link cannot rent.',
    'notice.forbidden.title': 'This is another rider\'s ride',
    'notice.forbidden.text': 'Ride {ride} cannot be watched with this link. To watch it, ask its rider for a share link; if it is yours, open your own link.',
    'notice.forbidden.text.watch': 'Ride {ride} cannot be watched with this share link. Ask its rider for a share link to this ride.',
    'receipt.cap': 'Fare cap',
    'receipt.floor': 'Discount limited to the fare',
    'receipt.distance': 'Distance {km} km',
    'rate.pause': 'paused {rate}/min',
    'rate.cap': 'at most {price} per {duration} min',
    'receipt.reason.rider': 'Returned by the rider.',
    'receipt.reason.operator': 'Ended by an operator.',
    'receipt.reason.operator_forced': 'Ended by an operator where the zone rules refuse an end.',
    'receipt.reason.time_limit': 'Ended automatically at the time limit.',
    'receipt.reason.pause_limit': 'Ended automatically after the pause limit.',
    'receipt.span': '{start} – {end}',
    'share.copied': 'Copied',
    'share.manual': 'Copy the link below',
    'share.label': 'Share link',
    'err.bad_request': 'The request was not understood.',
    'err.unknown_type': 'The server does not support this yet.',
    'err.ride_not_found': 'Ride not found: {ride}',
    'err.invalid_transition': 'That is not possible right now; the ride may already have changed.',
    'err.conflict': 'That ride already exists: {ride}',
    'err.too_large': 'The request is too large.',
    'err.unavailable': 'The server is briefly unavailable. Please try again shortly.',
    'err.unauthorized': 'Not authorised; the link may have expired.',
    'err.forbidden': 'You do not have access to this ride.',
    'err.rate_limited': 'Too many requests. Please try again shortly.',
    'err.other': 'Something went wrong.',
    'err.end_not_allowed': 'You cannot end the ride in this zone',
    'err.start_not_allowed': 'Rides cannot start in this zone',
    'err.position_required': 'Your position is not known yet. Please try returning again in a moment.',
    'map.label': 'Map of the ride',
    'map.distance': 'Distance {d}',
    'map.zone': 'Zone: {zone}',
    'map.refused': 'You cannot end the ride in this zone',
    'map.kind.nogo': 'No riding',
    'map.kind.noparking': 'No parking',
    'map.kind.slow': 'Slow zone',
    'map.kind.allowed': 'Service area',
  },
};

const LOCALE = { ko: 'ko-KR', en: 'en-US' };

function t(lang, key, vars) {
  let s = (T[lang] && T[lang][key]) || T.en[key] || key;
  if (vars) s = s.replace(/\{(\w+)\}/g, (m, k) => (k in vars ? String(vars[k]) : m));
  return s;
}

// Minor units per currency come from Intl (KRW 0, USD 2, …), not from a table here.
const digitsCache = {};
function currencyDigits(currency) {
  if (!(currency in digitsCache)) {
    try {
      digitsCache[currency] = new Intl.NumberFormat('en', { style: 'currency', currency })
        .resolvedOptions().maximumFractionDigits;
    } catch (e) {
      digitsCache[currency] = 0;
    }
  }
  return digitsCache[currency];
}

// Making an Intl.NumberFormat costs far more than formatting with one, and the consoles
// format on every repaint: one formatter per (locale, options), made once.
const formatters = {};
function formatter(locale, key, options) {
  const k = locale + '|' + key;
  return formatters[k] || (formatters[k] = new Intl.NumberFormat(locale, options));
}

function money(lang, minor, currency) {
  if (typeof minor !== 'number' || !currency) return '–';
  const digits = currencyDigits(currency);
  const major = minor / Math.pow(10, digits);
  if (lang === 'ko' && currency === 'KRW') {
    // Korean apps write 1,040원, not ₩1,040.
    return formatter('ko-KR', '').format(major) + '원';
  }
  return formatter(LOCALE[lang], 'currency|' + currency + '|' + digits, {
    style: 'currency', currency, minimumFractionDigits: digits, maximumFractionDigits: digits,
  }).format(major);
}

function num(lang, n) {
  return formatter(LOCALE[lang], '').format(n);
}

// 3분 12초, 1시간 3분 12초 / 3 min 12 s, 1 h 3 min 12 s (hours only past 60 minutes).
function duration(lang, seconds) {
  if (typeof seconds !== 'number' || seconds < 0) return '–';
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = Math.floor(seconds % 60);
  const one = formatter(LOCALE[lang], 'nogroup', { useGrouping: false });
  const mm = one.format(m);
  if (lang === 'ko') {
    return (h > 0 ? num(lang, h) + '시간 ' : '') + mm + '분 ' + one.format(s) + '초';
  }
  return (h > 0 ? num(lang, h) + ' h ' : '') + mm + ' min ' + one.format(s) + ' s';
}

// 850 m, 1.25 km (one format for both pages; metres are whole).
function metres(lang, m) {
  if (typeof m !== 'number' || m < 0) return '–';
  if (m < 1000) return num(lang, Math.round(m)) + ' m';
  return formatter(LOCALE[lang], 'km', { minimumFractionDigits: 2, maximumFractionDigits: 2 }).format(m / 1000) + ' km';
}

function clock(lang, ms) {
  if (typeof ms !== 'number') return '–';
  return new Intl.DateTimeFormat(LOCALE[lang], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    .format(new Date(ms));
}

// A receipt's lines as both pages show them. A pause line of 0 on a plan that does not bill
// pauses is left out: the server lists it whenever the ride was paused, but "pause charge
// 0" there only repeats what the times line says ("paused … (not billed)").
function receiptRows(lang, receipt, plan) {
  const billsPause = !!(plan && typeof plan === 'object' && plan.pause_rate);
  const out = [];
  for (const ln of receipt.lines || []) {
    if (ln.label === 'pause' && !ln.amount && !billsPause) continue;
    const key = 'receipt.' + ln.label;
    const text = T.ko[key] ? t(lang, key, { n: num(lang, ln.minutes || 0), km: num(lang, ln.km || 0) }) : ln.label;
    out.push({ label: ln.label, text, amount: ln.amount });
  }
  return out;
}

// Which of the receipt's times cost something: riding when a riding line charged more than
// 0 (a plan billing completed minutes charges nothing for the first 59 s), paused likewise.
function billedTimes(receipt) {
  const charged = (label) => (receipt.lines || []).some((ln) => ln.label === label && ln.amount > 0);
  return { riding: charged('riding'), paused: charged('pause') };
}

export { T, LOCALE, t, money, num, duration, metres, clock, currencyDigits, receiptRows, billedTimes };

// The browser tests call the formats as the page does (tests/test_page.py, test_formats_through_intl).
window.RP_I18N = { T, LOCALE, t, money, num, duration, metres, clock, currencyDigits, receiptRows, billedTimes };
