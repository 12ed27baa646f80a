/** The dashboard's one stylesheet and one script, served from memory (no build step, no CDN). */
export const CSS = `
:root{
--c-fg:#1f2328;--c-muted:#59636e;--c-line:#d1d9e0;--c-surface:#fff;--c-subtle:#f6f8fa;--c-accent:#0969da;--c-accent-fg:#fff;
--c-primary:#1f883d;--c-primary-fg:#fff;--c-danger:#cf222e;--c-danger-bg:#cf222e;--c-danger-fg:#fff;--c-s2:#2f7d4f;--c-s4:#8a5000;--c-s5:#b3261e;--c-ok:#1a7f37;--c-warn:#9a6700;
--c-top:#24292f;--c-top-fg:#fff;--c-top-muted:#c9d1d9;--c-top-hover:#32383f;--c-top-current:#3d444d;--c-top-line:#59636e;
--c-chip-bg:#ddf4ff;--c-chip-fg:#0550ae;--c-notice-bg:#dafbe1;--c-notice-line:#aceebb;--c-alert-bg:#ffebe9;--c-alert-line:#ffcecb;
--c-warning-bg:#fff8c5;--c-warning-line:#eed888;--c-current-row:#f6fbff;--c-focus:#0969da;
--c-test-bg:#fff1e0;--c-test-fg:#5c2a00;--c-test-line:#c26a00;
--s-1:.25rem;--s-2:.5rem;--s-3:.75rem;--s-4:1rem;--s-5:1.5rem;--s-6:2rem;
--font:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;--font-mono:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
--t-xs:.8rem;--t-sm:.875rem;--t-base:15px;--t-lg:1.15rem;--t-xl:1.5rem;--lh:1.5;
--r-sm:4px;--r-md:6px;--r-lg:10px;--r-full:999px;--shadow:0 1px 2px rgba(31,35,40,.08);
color-scheme:light dark;
--fg:var(--c-fg);--muted:var(--c-muted);--line:var(--c-line);--bg:var(--c-subtle);--accent:var(--c-accent);--danger:var(--c-danger);--ok:var(--c-ok)
}
/* Test mode: the header turns amber-brown (and a banner says so on every page, SANDBOX.md). */
.topbar.test-mode{--c-top:#7a3a00;--c-top-hover:#8f4500;--c-top-current:#9c4c00;--c-top-line:#c27a3a}
/* A dark scheme for who asks their system for one: the same tokens, contrast checked by axe in the tests. */
@media (prefers-color-scheme:dark){:root{
--c-fg:#e6edf3;--c-muted:#9ea7b3;--c-line:#3d444d;--c-surface:#0d1117;--c-subtle:#161b22;--c-accent:#58a6ff;
--c-primary:#238636;--c-primary-fg:#fff;--c-danger:#ff7b72;--c-danger-bg:#b62324;--c-danger-fg:#fff;--c-ok:#3fb950;
--c-s2:#3fb950;--c-s4:#d29922;--c-s5:#ff7b72;
--c-top:#010409;--c-top-fg:#f0f6fc;--c-top-muted:#b7bdc8;--c-top-hover:#21262d;--c-top-current:#30363d;--c-top-line:#3d444d;
--c-chip-bg:#0c2d6b;--c-chip-fg:#cae8ff;--c-notice-bg:#0f2e1c;--c-notice-line:#2e6c40;--c-alert-bg:#3a1519;--c-alert-line:#8e1519;
--c-warning-bg:#2e2410;--c-warning-line:#7d5e12;--c-current-row:#121d2f;--c-focus:#58a6ff;--shadow:none;
--c-test-bg:#3b1d00;--c-test-fg:#ffd9b0;--c-test-line:#d2802a}
.topbar.test-mode{--c-top:#4a2400;--c-top-hover:#5e2e00;--c-top-current:#6e3700}}
*{box-sizing:border-box}body{margin:0;font:var(--t-base)/var(--lh) var(--font);color:var(--c-fg);background:var(--c-surface)}
a{color:var(--c-accent)}h1{font-size:var(--t-xl);margin:var(--s-1) 0 var(--s-4);line-height:1.25}h2{font-size:var(--t-lg);margin:var(--s-5) 0 var(--s-2)}
:focus-visible{outline:2px solid var(--c-focus);outline-offset:2px}
.topbar :focus-visible{outline-color:var(--c-top-fg)}
.icon{width:1.1em;height:1.1em;vertical-align:-.2em;flex:none;stroke-width:2}
.topbar{display:flex;flex-wrap:wrap;align-items:center;gap:var(--s-2) var(--s-5);padding:var(--s-2) var(--s-5) 0;background:var(--c-top);color:var(--c-top-fg)}
.topbar a{color:var(--c-top-fg);text-decoration:none}.brand{font-weight:700;font-size:1.1rem;white-space:nowrap;display:inline-flex;align-items:center;gap:var(--s-2)}
.site-menu{display:contents}.topbar nav{order:3;flex-basis:100%;padding-bottom:var(--s-2)}.topbar .who{order:2}
.menu-toggle{display:none}
.topbar nav ul{display:flex;gap:var(--s-1);list-style:none;margin:0 0 0 -.6rem;padding:0;align-items:center;flex-wrap:wrap}
.topbar nav a{padding:.3rem .6rem;border-radius:var(--r-md);display:flex;align-items:center;gap:.35rem;white-space:nowrap}.topbar nav a:hover{background:var(--c-top-hover)}
.topbar nav a .icon{opacity:.85}
.topbar nav a[aria-current=page]{background:var(--c-top-current);font-weight:600}
.nav-title{color:var(--c-top-muted);font-size:var(--t-xs);text-transform:uppercase;margin-left:var(--s-2);white-space:nowrap}.sep{width:1px;height:1.2rem;background:var(--c-top-line);margin:0 var(--s-2)}
.who{margin-left:auto;display:flex;gap:var(--s-3);align-items:center;font-size:.9rem;flex-wrap:wrap}.who .email{color:var(--c-top-muted)}
main{max-width:72rem;margin:0 auto;padding:var(--s-5)}
.notice{background:var(--c-notice-bg);border:1px solid var(--c-notice-line);padding:.6rem .9rem;border-radius:var(--r-md);margin-bottom:var(--s-4)}
.alert{background:var(--c-alert-bg);border:1px solid var(--c-alert-line);padding:.6rem .9rem;border-radius:var(--r-md);margin-bottom:var(--s-4)}
.warning{background:var(--c-warning-bg);border:1px solid var(--c-warning-line);padding:.6rem .9rem;border-radius:var(--r-md);margin:var(--s-4) 0}
table{border-collapse:collapse;width:100%;margin:var(--s-2) 0 var(--s-4)}th,td{text-align:left;padding:var(--s-2) .6rem;border-bottom:1px solid var(--c-line);vertical-align:top}
td{overflow-wrap:break-word;word-break:normal}
th{font-size:var(--t-xs);text-transform:uppercase;letter-spacing:.02em;color:var(--c-muted);font-weight:600;background:var(--c-subtle);overflow-wrap:normal}
tbody th{text-transform:none;letter-spacing:0;font-size:inherit;color:var(--c-fg);background:none}
code,.token{overflow-wrap:anywhere}.nowrap code{overflow-wrap:normal}
.field{margin:.6rem 0;display:flex;flex-direction:column;gap:.2rem;max-width:32rem}
label{font-weight:600;font-size:.9rem}input[type=text],input[type=email],input[type=password],input[type=url],input[type=number],input[type=search],input[type=date],input[type=datetime-local],select,textarea{font:inherit;padding:.4rem .55rem;border:1px solid var(--c-muted);border-radius:var(--r-md);background:var(--c-surface);color:var(--c-fg)}
textarea{min-height:5rem}.has-error input,.has-error textarea,.has-error select{border-color:var(--c-danger)}
.error{color:var(--c-danger);font-size:var(--t-sm);margin:0}.hint{color:var(--c-muted);font-size:var(--t-sm);margin:0}
button,.button{font:inherit;font-weight:600;padding:.4rem .9rem;border-radius:var(--r-md);border:1px solid var(--c-primary);background:var(--c-primary);color:var(--c-primary-fg);cursor:pointer;text-decoration:none;display:inline-block;vertical-align:middle;overflow-wrap:break-word;text-align:left;max-width:100%;line-height:1.4;box-shadow:var(--shadow)}
button .icon,.button .icon{margin-right:.35rem}
button:hover,.button:hover{filter:brightness(.95)}
button.secondary,.button.secondary{background:var(--c-subtle);color:var(--c-fg);border-color:var(--c-line)}button.danger,.button.danger{background:var(--c-danger-bg);border-color:var(--c-danger-bg);color:var(--c-danger-fg)}
.topbar button.secondary{background:var(--c-top-hover);color:var(--c-top-fg);border-color:var(--c-top-line);padding:.2rem .6rem;box-shadow:none}
.inline{display:inline}.row{display:flex;gap:var(--s-3);align-items:flex-end;flex-wrap:wrap}.row .field{margin:0}
.toolbar{display:flex;justify-content:space-between;align-items:center;gap:var(--s-4);flex-wrap:wrap}
.chip{display:inline-block;background:var(--c-chip-bg);color:var(--c-chip-fg);border-radius:var(--r-full);padding:0 .55rem;font-size:var(--t-xs);margin:0 .2rem .2rem 0;white-space:nowrap}
.muted{color:var(--c-muted)}.mono,code{font-family:var(--font-mono);font-size:.9em}
.key-box{display:flex;gap:var(--s-2);align-items:center;background:var(--c-subtle);border:1px solid var(--c-line);padding:.6rem;border-radius:var(--r-md);max-width:48rem}
.key-box code{flex:1;min-width:0;overflow-wrap:anywhere}.checks{display:grid;grid-template-columns:repeat(2,max-content);gap:.3rem 1.5rem;border:0;padding:0;margin:.6rem 0}
.checks legend{font-weight:600;font-size:.9rem;margin-bottom:.3rem}.checks label{font-weight:400}
.pager{display:flex;gap:var(--s-2);margin-top:var(--s-2);flex-wrap:wrap}.bulk{border:1px solid var(--c-line);border-radius:var(--r-md);padding:.4rem .9rem .6rem;margin:var(--s-2) 0}.bulk legend{font-weight:600;font-size:.9rem}.check{font-weight:400;display:block;margin-top:var(--s-2)}.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0);white-space:nowrap}
.card{border:1px solid var(--c-line);border-radius:var(--r-lg);padding:var(--s-4) 1.25rem;margin:var(--s-4) 0;box-shadow:var(--shadow)}
.login{max-width:24rem;margin:4rem auto}.login h1{text-align:center}.fresh-install{border:1px solid var(--c-line);border-radius:var(--r-md);padding:var(--s-2) .9rem;margin-bottom:var(--s-4)}.fresh-install pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:var(--t-sm)}.login .sso{margin-top:var(--s-5);border-top:1px solid var(--c-line);padding-top:var(--s-2)}.sso-remove{margin-top:var(--s-4)}
.card>h2:first-child{margin-top:0}.upload-status{margin:0;align-self:center}.upload-status:empty{display:none}
pre{max-width:100%;overflow-x:auto}pre.example{background:var(--c-subtle);border:1px solid var(--c-line);border-radius:var(--r-md);padding:.6rem .9rem;overflow-x:auto}
dl.counts{display:grid;grid-template-columns:max-content minmax(0,max-content);gap:.2rem var(--s-4)}dl.counts dt{font-weight:600}dl.counts dd{margin:0}
ul.reasons{margin:0;padding-left:1.1rem}tr.import-refused td:nth-child(2){color:var(--c-danger);font-weight:600}
.warning p{margin:.2rem 0}.nowrap,p time,li time,dd time{white-space:nowrap}
details.changes summary{cursor:pointer;color:var(--c-accent);font-size:var(--t-sm)}details.changes table{margin:.3rem 0;width:auto}details.changes th,details.changes td{padding:.2rem var(--s-2);font-size:var(--t-sm)}
details.changes th[scope=row]{text-transform:none;background:none;color:var(--c-fg)}del{color:var(--c-danger)}ins{color:var(--c-ok);text-decoration:none}table.activity td.actor{min-width:9rem}
.tabs ul{display:flex;gap:var(--s-1);list-style:none;margin:0 0 var(--s-4);padding:0;border-bottom:1px solid var(--c-line);flex-wrap:wrap}
.tabs a{display:block;padding:.4rem .8rem;text-decoration:none;white-space:nowrap}.tabs a[aria-current=page]{border-bottom:2px solid var(--c-accent);font-weight:600}
main{overflow-wrap:break-word}input,select,textarea{max-width:100%}fieldset{min-width:0}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
#f-request-id{width:22rem}.filters{display:flex;flex-wrap:wrap;gap:var(--s-2) var(--s-4);align-items:flex-end;margin:var(--s-2) 0}.filters .field{margin:0}
.chart{margin:var(--s-2) 0 var(--s-4)}.chart svg{max-width:48rem;display:block}.chart svg text{fill:var(--c-fg)}.chart .narrow{display:none}
.legend{display:inline-flex;align-items:center;gap:.3rem;margin-right:var(--s-4);font-size:.9rem;white-space:nowrap}
td.actions{white-space:nowrap}.invite-link .key-box{margin:var(--s-2) 0}
meter{width:16rem;max-width:100%;height:1.2rem;vertical-align:middle}
.badge{display:inline-block;background:var(--c-chip-bg);color:var(--c-chip-fg);border-radius:var(--r-full);padding:0 .55rem;font-size:var(--t-xs);white-space:nowrap}tr.current td{background:var(--c-current-row)}
fieldset.policy{border:1px solid var(--c-line);border-radius:var(--r-md);padding:.4rem .9rem .6rem;margin:var(--s-2) 0 var(--s-4);max-width:40rem}fieldset.policy legend{font-weight:600}fieldset.policy+.hint{margin:0 0 var(--s-3)}
.choice{display:grid;grid-template-columns:auto 1fr;gap:0 var(--s-2);margin:var(--s-2) 0}.choice .hint{grid-column:2}td.member-actions form{display:block;margin:0 0 .3rem}.status{white-space:nowrap}.status.s2{color:var(--c-s2)}.status.s4{color:var(--c-s4)}.status.s5{color:var(--c-s5)}
.test-banner{display:flex;flex-wrap:wrap;align-items:center;gap:var(--s-2) var(--s-4);padding:var(--s-2) var(--s-5);background:var(--c-test-bg);color:var(--c-test-fg);border-bottom:3px solid var(--c-test-line)}
.test-banner p{margin:0}.mode-switch[aria-checked=true]{background:var(--c-test-bg);color:var(--c-test-fg);font-weight:600}
.mode-switch::before{content:"";display:inline-block;width:.7em;height:.7em;border-radius:50%;border:2px solid currentColor;margin-right:.35em;vertical-align:-.05em}
.mode-switch[aria-checked=true]::before{background:currentColor}
@media (max-width:48rem){
.test-banner{padding:var(--s-2) var(--s-3)}
.topbar{gap:var(--s-2) var(--s-4);padding:var(--s-2) var(--s-3)}
.nav-title{margin-left:0}.sep{display:none}main{padding:var(--s-4) var(--s-3)}
table{display:block;overflow-x:auto;max-width:100%;position:relative}
table.sessions thead{display:none}table.sessions tr{display:block;border-bottom:1px solid var(--c-line);padding:.4rem 0}table.sessions td{display:block;border:0;padding:.1rem .6rem}
table.sessions td[data-label]::before{content:attr(data-label) ": ";color:var(--c-muted);font-size:var(--t-sm)}.checks{grid-template-columns:1fr}.field{max-width:100%}
}
@media (max-width:64rem){.topbar{flex-wrap:wrap}}
/* Phones: the navigation folds behind a Menu button (a script opens it; without the script it stays open). */
@media (max-width:40rem){
.topbar{flex-wrap:wrap;justify-content:space-between;padding-bottom:var(--s-2)}
.site-menu{display:flex}.topbar nav{order:0;flex-basis:auto;padding:0}
pre.example{white-space:pre-wrap;overflow-wrap:anywhere}
.menu-toggle{display:inline-block}
.topbar[data-menu] .site-menu{display:none}
.topbar[data-menu=open] .site-menu{display:flex}
.site-menu{flex-basis:100%;flex-direction:column;align-items:stretch;gap:var(--s-3);padding:var(--s-2) 0}
.topbar nav ul{flex-direction:column;align-items:stretch}.topbar nav a{padding:.5rem .6rem}
.nav-title{margin:var(--s-2) 0 0 .6rem}
.who{margin-left:0;border-top:1px solid var(--c-top-line);padding-top:var(--s-3)}
/* Tables become stacked rows: each cell labelled by its column's heading (set by the script). */
table.stack{display:block;overflow:visible}
table.stack thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%)}
table.stack>tbody,table.stack>tbody>tr,table.stack>tbody>tr>td,table.stack>tbody>tr>th{display:block;width:auto}
table.stack>tbody>tr{border-bottom:1px solid var(--c-line);padding:var(--s-2) 0}
table.stack>tbody>tr>td,table.stack>tbody>tr>th{border:0;padding:.15rem 0;white-space:normal;min-width:0}
table.stack>tbody>tr>td[data-label],table.stack>tbody>tr>th[data-label]{display:flow-root;padding-left:7.5rem;min-height:1.6rem}
table.stack>tbody>tr>td[data-label]::before,table.stack>tbody>tr>th[data-label]::before{content:attr(data-label);float:left;margin:.15rem 0 0 -7.5rem;width:7rem;color:var(--c-muted);font-size:var(--t-xs);font-weight:600;text-transform:uppercase;overflow-wrap:break-word}
table.stack>tbody>tr>td[data-label=""]{padding-left:0}
table.stack>tbody>tr>td[data-label=""]::before{display:none}
table.stack td.actions{white-space:normal}
.chart .wide{display:none}.chart .narrow{display:block}
#f-request-id{width:100%}
.key-box{flex-wrap:wrap}
}
.passkey-sign-in{margin-top:var(--s-4);padding-top:var(--s-4);border-top:1px solid var(--c-line)}.passkey-sign-in button{width:100%;text-align:center}[data-passkey-status]:empty{display:none}
[data-passkey-status]{margin:var(--s-2) 0 0}td.actions details.rename{display:inline-block;margin-right:var(--s-2);vertical-align:middle}details.rename summary{cursor:pointer;color:var(--c-accent)}
details.rename[open]{display:block;margin:0 0 var(--s-2)}details.rename form{display:flex;flex-wrap:wrap;gap:.4rem;align-items:center;margin-top:.4rem}
@media (max-width:48rem){table.passkeys,table.passkeys tbody,table.passkeys tr,table.passkeys td{display:block}table.passkeys thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%)}
table.passkeys tr{border-bottom:1px solid var(--c-line);padding:var(--s-2) 0}table.passkeys td{border:0;padding:.1rem 0;white-space:normal}table.passkeys td[data-label]::before{content:attr(data-label) ": ";color:var(--c-muted);font-size:var(--t-sm)}}
code.wrap{overflow-wrap:anywhere}svg.qr{display:block;max-width:100%;height:auto;background:#fff}form.again{margin-top:var(--s-4)}ul.codes{list-style:none;padding:0;display:grid;grid-template-columns:repeat(auto-fill,minmax(9rem,1fr));gap:.4rem;font-size:1.1rem}
/* issue 32 frictions: the bulk box's hidden pickers */
.bulk [data-bulk-for][hidden]{display:none}
form.log-filters{gap:.75rem 1rem}form.log-filters .field{flex:1 1 12rem;max-width:none}form.log-filters .field.wide{flex:2 1 16rem}
form.log-filters input,form.log-filters select,form.log-filters #f-request-id{width:100%}form.log-filters[role=search] .field.wide{flex:0 1 28rem}
.empty-state{border:1px dashed var(--c-line);border-radius:6px;padding:.8rem 1rem;margin:.5rem 0 1rem}.empty-state p{margin:0}.empty-state .empty-title{font-weight:600}
ul.stats{list-style:none;margin:0 0 1rem;padding:0;display:grid;grid-template-columns:repeat(auto-fit,minmax(6.5rem,1fr));gap:.6rem}
ul.stats a{display:block;border:1px solid var(--c-line);border-radius:8px;padding:.6rem .8rem;text-decoration:none;color:var(--c-fg)}ul.stats a:hover{border-color:var(--c-accent)}
.stat-number{display:block;font-size:1.5rem;line-height:1.2;font-variant-numeric:tabular-nums}.stat-label{color:var(--c-muted)}
ol.steps{list-style:none;margin:.5rem 0;padding:0}ol.steps li{display:flex;gap:.6rem;align-items:flex-start;padding:.4rem 0}
.step-mark{flex:none;width:1.4rem;height:1.4rem;border-radius:50%;border:2px solid var(--c-line);text-align:center;line-height:1.1rem;font-size:.85rem}
ol.steps li.done .step-mark{background:var(--c-ok);border-color:var(--c-ok);color:var(--c-primary-fg)}ol.steps li.done strong{color:var(--c-muted)}
.usage-chart{margin:.5rem 0}.usage-chart svg.usage-bars{display:block;width:100%;height:8rem;max-width:none}.usage-total{margin:0 0 .4rem}
.usage-axis{display:flex;justify-content:space-between;font-size:.85rem;color:var(--c-muted)}table.usage-days td,table.usage-days th{font-variant-numeric:tabular-nums}
`;

export const JS = `
// Phones: the Menu button folds the navigation away (without this script it stays open).
(() => {
  const bar = document.querySelector('.topbar');
  const toggle = bar && bar.querySelector('.menu-toggle');
  if (!toggle) return;
  bar.dataset.menu = 'closed';
  toggle.addEventListener('click', () => {
    const open = bar.dataset.menu !== 'open';
    bar.dataset.menu = open ? 'open' : 'closed';
    toggle.setAttribute('aria-expanded', String(open));
  });
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && bar.dataset.menu === 'open') { bar.dataset.menu = 'closed'; toggle.setAttribute('aria-expanded', 'false'); toggle.focus(); }
  });
})();
// Narrow screens show each table row as a stack of cells: each cell is labelled with its column's heading.
for (const table of document.querySelectorAll('main table')) {
  if (table.parentElement.closest('table') || table.closest('details.changes') || !table.tHead) continue;
  const headings = [...table.tHead.rows[0].cells].map((cell) => (cell.querySelector('input') ? '' : cell.textContent.trim()));
  for (const row of table.tBodies[0] ? table.tBodies[0].rows : []) {
    [...row.cells].forEach((cell, i) => { if (!cell.hasAttribute('data-label') && headings[i] !== undefined) cell.setAttribute('data-label', headings[i]); });
  }
  table.classList.add('stack');
}
document.addEventListener('click', async (event) => {
  const button = event.target.closest('[data-copy]');
  if (!button) return;
  const text = document.getElementById(button.dataset.copy).textContent;
  try { await navigator.clipboard.writeText(text); button.textContent = 'Copied'; } catch { button.textContent = 'Select and copy'; }
});
document.addEventListener('change', (event) => {
  // Ticking a write scope ticks its read scope: write includes read.
  const box = event.target;
  if (box.name === 'scopes' && box.value.endsWith(':write') && box.checked) {
    const read = document.querySelector('input[name=scopes][value="' + box.value.replace(':write', ':read') + '"]');
    if (read) read.checked = true;
  }
});
document.addEventListener('change', (event) => {
  // The contacts list's header checkbox ticks (or unticks) every row of the page.
  const all = event.target;
  if (!all.dataset || !all.dataset.selectAll) return;
  for (const box of all.form.querySelectorAll('input[type=checkbox][name="' + all.dataset.selectAll + '"]')) box.checked = all.checked;
});
// The contacts list's bulk box shows only the picker its action needs (without the script every
// picker shows, and the server reads only the one the action uses).
function showBulkPicker(select) {
  for (const picker of select.form.querySelectorAll('[data-bulk-for]')) picker.hidden = picker.dataset.bulkFor !== select.value;
}
for (const select of document.querySelectorAll('select[data-bulk-action]')) showBulkPicker(select);
document.addEventListener('change', (event) => {
  if (event.target.matches && event.target.matches('select[data-bulk-action]')) showBulkPicker(event.target);
});
document.addEventListener('submit', async (event) => {
  const form = event.target;
  if (!form.matches('[data-upload]')) return;
  // The same two steps as the API: reserve, then PUT the bytes to the returned upload URL.
  event.preventDefault();
  const input = form.querySelector('input[type=file]');
  const status = form.querySelector('[data-status]');
  const file = input.files[0];
  if (!file) { status.textContent = 'Choose a file first.'; return; }
  status.textContent = 'Reserving…';
  const body = new URLSearchParams({ _csrf: form.querySelector('[name=_csrf]').value, name: file.name, content_type: file.type || 'application/octet-stream', size: String(file.size) });
  let reserved, reservation;
  try {
    reserved = await fetch('/files/reserve', { method: 'POST', body, headers: { accept: 'application/json' }, redirect: 'manual' });
    reservation = await reserved.json();
  } catch {
    status.textContent = 'The upload could not start: reload the page (you may have been signed out) and try again.';
    return;
  }
  if (!reserved.ok) { status.textContent = reservation.message || 'The upload was refused.'; return; }
  status.textContent = 'Uploading…';
  let put;
  try { put = await fetch(reservation.upload_url, { method: 'PUT', body: file }); }
  catch { status.textContent = 'The upload was interrupted. Try again.'; return; }
  if (!put.ok) { const problem = await put.json().catch(() => ({})); status.textContent = problem.detail || 'The upload failed.'; return; }
  window.location.assign('/files?uploaded=' + encodeURIComponent(reservation.id));
});
`;
