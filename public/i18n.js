// Texts and formatting for Korean and English. Numbers, money and times go through Intl;
// the page only formats what the server sent (it never computes a fare).
'use strict';

(function () {
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
      'rate.base': '기본 {price}',
      'rate.per': '분당 {rate}',
      'rate.perN': '{n}분당 {rate}',
      'rate.once': '{rate}',
      'rate.from': '{start}분부터 ',
      'warning': '{t} 후 자동으로 반납됩니다.',
      'receipt.title': '영수증',
      'receipt.total': '합계',
      'receipt.unlock': '기본 요금',
      'receipt.riding': '주행 {n}분',
      'receipt.pause': '일시정지 {n}분',
      'receipt.cap': '요금 상한 할인',
      'receipt.floor': '할인 한도 조정',
      'receipt.distance': '주행 거리 {km}km',
      'rate.pause': '일시정지 분당 {rate}',
      'rate.cap': '{duration}분 최대 {price}',
      'receipt.reason.rider': '직접 반납했습니다.',
      'receipt.reason.time_limit': '이용 시간 한도에 도달해 자동으로 반납되었습니다.',
      'receipt.reason.pause_limit': '일시정지 한도를 넘어 자동으로 반납되었습니다.',
      'receipt.span': '{start} ~ {end}',
      'receipt.riding_for': '이용 {elapsed}',
      'receipt.paused_for': '일시정지 {paused}',
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
      'receipt.pause': 'Paused {n} min',
      'receipt.cap': 'Fare cap',
      'receipt.floor': 'Discount limited to the fare',
      'receipt.distance': 'Distance {km} km',
      'rate.pause': 'paused {rate}/min',
      'rate.cap': 'at most {price} per {duration} min',
      'receipt.reason.rider': 'Returned by the rider.',
      'receipt.reason.time_limit': 'Ended automatically at the time limit.',
      'receipt.reason.pause_limit': 'Ended automatically after the pause limit.',
      'receipt.span': '{start} – {end}',
      'receipt.riding_for': 'riding {elapsed}',
      'receipt.paused_for': 'paused {paused}',
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

  function money(lang, minor, currency) {
    if (typeof minor !== 'number' || !currency) return '–';
    const digits = currencyDigits(currency);
    const major = minor / Math.pow(10, digits);
    if (lang === 'ko' && currency === 'KRW') {
      // Korean apps write 1,040원, not ₩1,040.
      return new Intl.NumberFormat('ko-KR').format(major) + '원';
    }
    return new Intl.NumberFormat(LOCALE[lang], {
      style: 'currency', currency, minimumFractionDigits: digits, maximumFractionDigits: digits,
    }).format(major);
  }

  function num(lang, n) {
    return new Intl.NumberFormat(LOCALE[lang]).format(n);
  }

  // 3분 12초, 1시간 3분 12초 / 3 min 12 s, 1 h 3 min 12 s (hours only past 60 minutes).
  function duration(lang, seconds) {
    if (typeof seconds !== 'number' || seconds < 0) return '–';
    const h = Math.floor(seconds / 3600);
    const m = Math.floor((seconds % 3600) / 60);
    const s = Math.floor(seconds % 60);
    const one = new Intl.NumberFormat(LOCALE[lang], { useGrouping: false });
    const mm = one.format(m);
    if (lang === 'ko') {
      return (h > 0 ? num(lang, h) + '시간 ' : '') + mm + '분 ' + one.format(s) + '초';
    }
    return (h > 0 ? num(lang, h) + ' h ' : '') + mm + ' min ' + one.format(s) + ' s';
  }

  function clock(lang, ms) {
    if (typeof ms !== 'number') return '–';
    return new Intl.DateTimeFormat(LOCALE[lang], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
      .format(new Date(ms));
  }

  window.RP_I18N = { T, LOCALE, t, money, num, duration, clock, currencyDigits };
})();
