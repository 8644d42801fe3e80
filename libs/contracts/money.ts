/** Money is integer micro-USD wherever it is counted; USD amounts cross boundaries as decimal strings. */

const USD_AMOUNT = /^(\d{1,7})(?:\.(\d{1,6}))?$/;

/** "30" → 30_000_000 micro-USD, exactly (no float on the way). */
export function usdToMicroUsd(usd: string): number {
  const match = USD_AMOUNT.exec(usd);
  if (!match) throw new RangeError(`expected a USD amount such as "30" or "0.15", got "${usd}"`);
  return Number(match[1]) * 1_000_000 + Number((match[2] ?? '').padEnd(6, '0'));
}

/** 30_000_000 micro-USD → "30"; 150_000 → "0.15". */
export function microUsdToUsd(microUsd: number): string {
  const whole = Math.floor(microUsd / 1_000_000);
  const fraction = String(microUsd % 1_000_000)
    .padStart(6, '0')
    .replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : String(whole);
}
