const MIN = 60_000;
const DAY = 24 * 60 * MIN;

/**
 * Where a spec's injected clock starts when it dates its rows around "now": this minute, unless
 * that lies within 2 days before or 10 days after a new year, then 3 weeks earlier. A ranking's
 * default sample starts on 1 January of its end's year (contract 4): rows a spec dates days back
 * would fall out of it in early January, and a clock moved a few minutes on from 31 December would
 * start the sample again.
 */
export function specStart(now = Date.now()): number {
  const t = Math.floor(now / MIN) * MIN;
  const year = new Date(t).getUTCFullYear();
  const nearNewYear = t < Date.UTC(year, 0, 1) + 10 * DAY || t >= Date.UTC(year + 1, 0, 1) - 2 * DAY;
  return nearNewYear ? t - 21 * DAY : t;
}
