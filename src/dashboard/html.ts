/**
 * Server-rendered HTML with escaping by default: every interpolated value is escaped unless it is
 * itself `html`. Pages are plain functions from data to markup; no business rule lives here.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

type Part = Html | string | number | boolean | null | undefined | Part[];

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function render(part: Part): string {
  if (part === null || part === undefined || part === false || part === true) return '';
  if (part instanceof Html) return part.value;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new Html(out);
}

/** Field errors by field name, shown next to each input: each a sentence (see errorSentence). */
export type FieldErrors = Record<string, string>;

/** How a field is named in a sentence, where its name read aloud will not do (see fieldLabel). */
const FIELD_LABELS: Record<string, string> = {
  url: 'URL',
  client_id: 'Client ID',
  client_secret: 'Client secret',
  issuer: 'Issuer URL',
  domains: 'Email domains',
  label_ids: 'Labels',
  contact_ids: 'Contacts',
  expires_in_days: 'Expiry',
  allowed_ips: 'Allowed IP addresses',
  content_type: 'Content type',
  current_password: 'Current password',
};

/** A field's name as a sentence begins with it: `first_name` → "First name". */
export function fieldLabel(field: string): string {
  const name = field.replace(/\[\d+\]$/, '');
  const known = FIELD_LABELS[name];
  if (known) return known;
  const words = name.replace(/[._]+/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

const count = (n: string) => Number(n).toLocaleString('en');

/**
 * A validation message as a sentence about the field: the domain's messages ("must not be
 * empty") and a JSON Schema validator's ("must NOT have fewer than 1 characters", "must match
 * format \"email\"") alike. The API's problem documents keep the messages as they are; only the
 * dashboard says them this way.
 */
export function errorSentence(field: string, message: string, label = fieldLabel(field)): string {
  const m = message.trim().replace(/\.$/, '');
  const rules: [RegExp, (match: RegExpExecArray) => string][] = [
    [
      /^(must not be empty|must NOT have fewer than 1 characters?|is required|must have required property .*)$/i,
      () => `${label} can't be empty.`,
    ],
    [/^must NOT have fewer than (\d+) characters$/, (x) => `${label} must be at least ${count(x[1]!)} characters long.`],
    [/^must (?:be at most|NOT have more than) (\d+) characters$/, (x) => `${label} can be at most ${count(x[1]!)} characters long.`],
    [/^must be (\d+) to (\d+) characters$/, (x) => `${label} must be ${count(x[1]!)} to ${count(x[2]!)} characters long.`],
    [/^must NOT have more than (\d+) items$/, (x) => `${label} can have at most ${count(x[1]!)}.`],
    [/^must NOT have fewer than 1 items$/, () => `Choose at least one for ${label.toLowerCase()}.`],
    [/^(must match format "email"|must be a valid email address.*)$/, () => `${label} must be an email address such as ada@example.com.`],
    [/^must match format "(uri|url|uri-reference)"$/, () => `${label} must be a full URL such as https://example.com/hook.`],
    [/^must match format "date-time"$/, () => `${label} must be a date and time such as 2026-01-31T09:00:00Z.`],
    [/^must match pattern .*$/, () => `${label} has characters or a form that isn't allowed.`],
    [/^must be text without control characters$/, () => `${label} can't contain control characters.`],
    [/^must be (string|integer|number|boolean|array|object)$/, () => `${label} has the wrong kind of value.`],
  ];
  for (const [pattern, say] of rules) {
    const match = pattern.exec(m);
    if (match) return say(match);
  }
  // The domain's other messages: "must use https" → "URL must use https."; one that is a phrase
  // of its own ("choose at least one scope") becomes a sentence.
  const end = /[.!?]$/.test(m) ? '' : '.';
  if (/^(must|is|are|can|cannot|should|would|has|have|needs?)\b/.test(m)) return `${label} ${m}${end}`;
  return `${m.charAt(0).toUpperCase()}${m.slice(1)}${end}`;
}

/** Field errors by field name, each a sentence; `labels` names fields as their form labels them. */
export function fieldErrors(errors: { field: string; message: string }[], labels: Record<string, string> = {}): FieldErrors {
  const out: FieldErrors = {};
  for (const e of errors) {
    const field = e.field.replace(/\[\d+\]$/, '');
    const sentence = errorSentence(e.field, e.message, labels[field]);
    out[field] = out[field] ? `${out[field]} ${sentence}` : sentence;
  }
  return out;
}

/** A labelled input with its error message next to it (aria-describedby ties them together). */
export function field(options: {
  name: string;
  label: string;
  value?: string | null;
  type?: string;
  errors?: FieldErrors;
  required?: boolean;
  hint?: string;
  autocomplete?: string;
  multiline?: boolean;
}): Html {
  const id = `f-${options.name}`;
  const error = options.errors?.[options.name];
  const describedBy = [error ? `${id}-error` : '', options.hint ? `${id}-hint` : ''].filter(Boolean).join(' ');
  const attrs = html`name="${options.name}"
  id="${id}"${options.required ? html` required` : ''}${
    describedBy ? html` aria-describedby="${describedBy}"` : ''
  }${error ? html` aria-invalid="true"` : ''}${options.autocomplete ? html` autocomplete="${options.autocomplete}"` : ''}`;
  const input = options.multiline
    ? html`<textarea ${attrs} rows="4">${options.value ?? ''}</textarea>`
    : html`<input type="${options.type ?? 'text'}" ${attrs} value="${options.value ?? ''}" />`;
  return html`<div class="field${error ? ' has-error' : ''}">
    <label for="${id}">${options.label}</label>
    ${input} ${options.hint ? html`<p class="hint" id="${id}-hint">${options.hint}</p>` : ''}
    ${error ? html`<p class="error" id="${id}-error">${error}</p>` : ''}
  </div>`;
}

const NUMBERS = new Intl.NumberFormat('en');

/** Every count and total the dashboard prints, one way: 10,000. */
export function formatNumber(n: number): string {
  return NUMBERS.format(n);
}

/** "1 contact", "10,000 contacts": a formatted count and its noun. */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${formatNumber(n)} ${n === 1 ? one : many}`;
}

/**
 * A list with nothing to show, worded one way on every page: what is missing ("No contacts yet.")
 * and one line on how to add the first, or ("No contact matches this search.") what to try.
 */
export function emptyState(title: string, how: Html | string): Html {
  return html`<div class="empty-state">
    <p class="empty-title">${title}</p>
    <p class="hint">${how}</p>
  </div>`;
}
