/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4, what GET /metrics
 * serves), written from the format's rules
 * (prometheus.io/docs/instrumenting/exposition_formats/#text-based-format) because no npm package
 * was fit for it: parse-prometheus-text-format (the common one) has had no release since 2019 and
 * merges the series of a labelled histogram into one (its open issue #13, unmerged PR #8), and
 * prom2javascript (one 0.x release) is a set of regular expressions that rejects NaN, -Inf and
 * metric names with colons and checks neither grouping nor duplicate series.
 *
 * Refused here, as Prometheus's own parser refuses them: a last line without its line feed, a
 * carriage return, a malformed metric or label name, a label name starting with `__` or given
 * twice, an escape other than \\ \" \n in a label value (\\ \n in HELP), a value that is not a
 * float as Go's ParseFloat reads one (NaN, +Inf and -Inf are, in any case) or a timestamp that is not an integer, HELP or TYPE given twice
 * or after the family's samples, an unknown type, a family whose lines are not one group, the
 * same series twice; and, for the types' own rules: a negative counter, a histogram bucket
 * without `le` or not cumulative, a histogram or summary without +Inf bucket, _sum or _count,
 * or whose _count differs from its +Inf bucket.
 */

export type MetricType = 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';

export interface Sample {
  /** The sample's own name: `x_bucket`, `x_sum`, `x_count` for a histogram `x`. */
  name: string;
  labels: Record<string, string>;
  value: number;
  timestamp?: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | null;
  samples: Sample[];
}

export class ExpositionError extends Error {
  constructor(line: number, message: string) {
    super(`line ${line}: ${message}`);
  }
}

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** What Go's strconv.ParseFloat reads in base 10: special values in any case (prom-client writes `Nan`). */
const FLOAT = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?)$|^nan$/i;
const TYPES: MetricType[] = ['counter', 'gauge', 'histogram', 'summary', 'untyped'];

function float(text: string, line: number): number {
  if (!FLOAT.test(text)) throw new ExpositionError(line, `"${text}" is not a float`);
  if (/inf/i.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
  return /nan/i.test(text) ? NaN : Number(text);
}

function unescape(text: string, allowed: string, line: number): string {
  return text.replace(/\\(.?)/g, (_match, char: string) => {
    if (!allowed.includes(char) || char === '') throw new ExpositionError(line, `invalid escape \\${char}`);
    return char === 'n' ? '\n' : char;
  });
}

/** `{a="x",b="y"}` from `text[start]`; returns the labels and the index after `}`. */
function labelsAt(text: string, start: number, line: number): { labels: Record<string, string>; end: number } {
  const labels: Record<string, string> = {};
  let i = start + 1;
  const blanks = () => {
    while (text[i] === ' ' || text[i] === '\t') i++;
  };
  for (;;) {
    blanks();
    if (text[i] === '}') return { labels, end: i + 1 };
    const name = /^[^=\s]*/.exec(text.slice(i))![0];
    if (!LABEL_NAME.test(name)) throw new ExpositionError(line, `invalid label name "${name}"`);
    if (name.startsWith('__')) throw new ExpositionError(line, `label name "${name}" is reserved`);
    if (Object.hasOwn(labels, name)) throw new ExpositionError(line, `label "${name}" given twice`);
    i += name.length;
    blanks();
    if (text[i] !== '=') throw new ExpositionError(line, `expected = after label "${name}"`);
    i++;
    blanks();
    if (text[i] !== '"') throw new ExpositionError(line, `expected " to open the value of "${name}"`);
    let j = i + 1;
    while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
    if (j >= text.length) throw new ExpositionError(line, `unterminated value of "${name}"`);
    labels[name] = unescape(text.slice(i + 1, j), '\\"n', line);
    i = j + 1;
    blanks();
    if (text[i] === ',') i++;
    else if (text[i] !== '}') throw new ExpositionError(line, `expected , or } after label "${name}"`);
  }
}

function sampleLine(text: string, line: number): Sample {
  const name = /^[^\s{]*/.exec(text)![0];
  if (!METRIC_NAME.test(name)) throw new ExpositionError(line, `invalid metric name "${name}"`);
  let rest = text.slice(name.length);
  let labels: Record<string, string> = {};
  if (rest.startsWith('{')) {
    const parsed = labelsAt(text, name.length, line);
    labels = parsed.labels;
    rest = text.slice(parsed.end);
  }
  if (!/^[ \t]/.test(rest)) throw new ExpositionError(line, 'expected a blank before the value');
  const tokens = rest.trim().split(/[ \t]+/);
  if (tokens.length < 1 || tokens.length > 2) throw new ExpositionError(line, 'expected a value and at most a timestamp');
  const sample: Sample = { name, labels, value: float(tokens[0]!, line) };
  if (tokens[1] !== undefined) {
    if (!/^-?\d+$/.test(tokens[1])) throw new ExpositionError(line, `timestamp "${tokens[1]}" is not an integer`);
    sample.timestamp = Number(tokens[1]);
  }
  return sample;
}

function belongs(family: Family, name: string): boolean {
  const suffixes = family.type === 'histogram' ? ['_bucket', '_sum', '_count'] : family.type === 'summary' ? ['', '_sum', '_count'] : [''];
  return suffixes.some((suffix) => family.name + suffix === name);
}

const seriesKey = (sample: Sample, without = '') =>
  `${sample.name}{${Object.keys(sample.labels)
    .filter((k) => k !== without)
    .sort()
    .map((k) => `${k}=${JSON.stringify(sample.labels[k])}`)
    .join(',')}}`;

/** Parses an exposition; throws ExpositionError naming the first line that breaks a rule. */
export function parsePrometheusText(text: string): Map<string, Family> {
  if (text.includes('\r')) throw new ExpositionError(0, 'carriage return (lines end with \\n alone)');
  if (text !== '' && !text.endsWith('\n')) throw new ExpositionError(0, 'the last line does not end with a line feed');
  const families = new Map<string, Family>();
  const typed = new Set<string>();
  const series = new Set<string>();
  let current: Family | null = null;
  const open = (name: string, line: number): Family => {
    if (current?.name === name) return current;
    if (families.has(name)) throw new ExpositionError(line, `the lines of ${name} are not one group`);
    current = { name, type: 'untyped', help: null, samples: [] };
    families.set(name, current);
    return current;
  };
  text.split('\n').forEach((raw, index) => {
    const line = index + 1;
    const trimmed = raw.trim();
    if (trimmed === '') return;
    if (trimmed.startsWith('#')) {
      const [, keyword, after] = /^#[ \t]*(\S*)[ \t]*(.*)$/.exec(trimmed)!;
      if (keyword !== 'HELP' && keyword !== 'TYPE') return; // a comment
      const [, name, rest] = /^(\S*)[ \t]*(.*)$/.exec(after!)!;
      if (!METRIC_NAME.test(name!)) throw new ExpositionError(line, `${keyword} without a valid metric name`);
      const family = open(name!, line);
      if (family.samples.length > 0) throw new ExpositionError(line, `${keyword} of ${name} after its samples`);
      if (keyword === 'HELP') {
        if (family.help !== null) throw new ExpositionError(line, `second HELP for ${name}`);
        family.help = unescape(rest!, '\\n', line);
      } else {
        if (typed.has(name!)) throw new ExpositionError(line, `second TYPE for ${name}`);
        if (!TYPES.includes(rest as MetricType)) throw new ExpositionError(line, `unknown type "${rest}" for ${name}`);
        family.type = rest as MetricType;
        typed.add(name!);
      }
      return;
    }
    const sample = sampleLine(trimmed, line);
    const family = current && belongs(current, sample.name) ? current : open(sample.name, line);
    const key = seriesKey(sample);
    if (series.has(key)) throw new ExpositionError(line, `series ${key} given twice`);
    series.add(key);
    if (family.type === 'counter' && !(sample.value >= 0)) throw new ExpositionError(line, `counter ${key} is negative or NaN`);
    family.samples.push(sample);
  });
  for (const family of families.values()) {
    if (family.type === 'histogram') checkHistogram(family);
    if (family.type === 'summary') checkSummary(family);
  }
  return families;
}

function groups(family: Family, split: string): Map<string, Sample[]> {
  const out = new Map<string, Sample[]>();
  for (const sample of family.samples) {
    const key = seriesKey({ ...sample, name: family.name }, split);
    out.set(key, [...(out.get(key) ?? []), sample]);
  }
  return out;
}

function checkHistogram(family: Family): void {
  for (const [key, samples] of groups(family, 'le')) {
    const buckets = samples.filter((s) => s.name === `${family.name}_bucket`);
    if (buckets.some((b) => b.labels.le === undefined)) throw new ExpositionError(0, `${key}: a bucket without le`);
    const bounds = buckets.map((b) => ({ le: float(b.labels.le!, 0), value: b.value })).sort((a, b) => a.le - b.le);
    if (bounds.at(-1)?.le !== Infinity) throw new ExpositionError(0, `${key}: no +Inf bucket`);
    if (bounds.some((b, i) => i > 0 && b.value < bounds[i - 1]!.value)) throw new ExpositionError(0, `${key}: buckets not cumulative`);
    const count = samples.find((s) => s.name === `${family.name}_count`);
    if (!samples.some((s) => s.name === `${family.name}_sum`) || !count) throw new ExpositionError(0, `${key}: no _sum or _count`);
    if (count.value !== bounds.at(-1)!.value) throw new ExpositionError(0, `${key}: _count differs from the +Inf bucket`);
  }
}

function checkSummary(family: Family): void {
  for (const [key, samples] of groups(family, 'quantile')) {
    for (const q of samples.filter((s) => s.name === family.name)) {
      const quantile = q.labels.quantile === undefined ? NaN : float(q.labels.quantile, 0);
      if (!(quantile >= 0 && quantile <= 1)) throw new ExpositionError(0, `${key}: a quantile outside [0, 1]`);
    }
    if (!samples.some((s) => s.name === `${family.name}_sum`) || !samples.some((s) => s.name === `${family.name}_count`)) {
      throw new ExpositionError(0, `${key}: no _sum or _count`);
    }
  }
}
