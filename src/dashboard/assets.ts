/** The dashboard's one stylesheet and one script, served from memory (no build step, no CDN). */
export const CSS = `
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#f6f8fa;--accent:#0969da;--danger:#cf222e;--ok:#1a7f37}
*{box-sizing:border-box}body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:#fff}
a{color:var(--accent)}h1{font-size:1.5rem;margin:.2rem 0 1rem}h2{font-size:1.15rem;margin:1.5rem 0 .5rem}
.topbar{display:flex;align-items:center;gap:1.5rem;padding:.6rem 1.5rem;background:#24292f;color:#fff;flex-wrap:wrap}
.topbar a{color:#fff;text-decoration:none}.brand{font-weight:700;font-size:1.1rem}
.topbar nav ul{display:flex;gap:.25rem;list-style:none;margin:0;padding:0;align-items:center}
.topbar nav a{padding:.3rem .6rem;border-radius:6px;display:block}.topbar nav a:hover{background:#32383f}
.topbar nav a[aria-current=page]{background:#3d444d;font-weight:600}
.nav-title{color:#9198a1;font-size:.8rem;text-transform:uppercase;margin-left:.5rem}.sep{width:1px;height:1.2rem;background:#59636e;margin:0 .4rem}
.who{margin-left:auto;display:flex;gap:.75rem;align-items:center;font-size:.9rem}.who .email{color:#d1d9e0}
main{max-width:72rem;margin:0 auto;padding:1.5rem}
.notice{background:#dafbe1;border:1px solid #aceebb;padding:.6rem .9rem;border-radius:6px;margin-bottom:1rem}
.alert{background:#ffebe9;border:1px solid #ffcecb;padding:.6rem .9rem;border-radius:6px;margin-bottom:1rem}
.warning{background:#fff8c5;border:1px solid #eed888;padding:.6rem .9rem;border-radius:6px;margin:1rem 0}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1rem}th,td{text-align:left;padding:.5rem .6rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:.8rem;text-transform:uppercase;color:var(--muted);font-weight:600;background:var(--bg)}
.field{margin:.6rem 0;display:flex;flex-direction:column;gap:.2rem;max-width:32rem}
label{font-weight:600;font-size:.9rem}input[type=text],input[type=email],input[type=password],input[type=url],input[type=number],input[type=search],select,textarea{font:inherit;padding:.4rem .55rem;border:1px solid var(--line);border-radius:6px;background:#fff}
textarea{min-height:5rem}.has-error input,.has-error textarea,.has-error select{border-color:var(--danger)}
.error{color:var(--danger);font-size:.85rem;margin:0}.hint{color:var(--muted);font-size:.85rem;margin:0}
button,.button{font:inherit;font-weight:600;padding:.4rem .9rem;border-radius:6px;border:1px solid #1f883d;background:#1f883d;color:#fff;cursor:pointer;text-decoration:none;display:inline-block}
button.secondary,.button.secondary{background:#f6f8fa;color:var(--fg);border-color:var(--line)}button.danger{background:var(--danger);border-color:var(--danger)}
.topbar button.secondary{background:#32383f;color:#fff;border-color:#59636e;padding:.2rem .6rem}
.inline{display:inline}.row{display:flex;gap:.75rem;align-items:flex-end;flex-wrap:wrap}.row .field{margin:0}
.toolbar{display:flex;justify-content:space-between;align-items:center;gap:1rem;flex-wrap:wrap}
.chip{display:inline-block;background:#ddf4ff;color:#0550ae;border-radius:999px;padding:0 .55rem;font-size:.8rem;margin:0 .2rem .2rem 0}
.muted{color:var(--muted)}.mono,code{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.9em}
.key-box{display:flex;gap:.5rem;align-items:center;background:var(--bg);border:1px solid var(--line);padding:.6rem;border-radius:6px;max-width:48rem}
.key-box code{flex:1;word-break:break-all}.checks{display:grid;grid-template-columns:repeat(2,max-content);gap:.3rem 1.5rem;border:0;padding:0;margin:.6rem 0}
.checks legend{font-weight:600;font-size:.9rem;margin-bottom:.3rem}.checks label{font-weight:400}
.pager{display:flex;gap:.5rem;margin-top:.5rem}.bulk{border:1px solid var(--line);border-radius:6px;padding:.4rem .9rem .6rem;margin:.5rem 0}.bulk legend{font-weight:600;font-size:.9rem}.check{font-weight:400;display:block;margin-top:.5rem}.visually-hidden{position:absolute;width:1px;height:1px;overflow:hidden;clip:rect(0 0 0 0)}
.card{border:1px solid var(--line);border-radius:8px;padding:1rem 1.25rem;margin:1rem 0}
.login{max-width:24rem;margin:4rem auto}.login h1{text-align:center}.fresh-install{border:1px solid var(--line);border-radius:6px;padding:.5rem .9rem;margin-bottom:1rem}.fresh-install pre{white-space:pre-wrap;overflow-wrap:anywhere;font-size:.85rem}.login .sso{margin-top:1.5rem;border-top:1px solid var(--line);padding-top:.5rem}.sso-remove{margin-top:1rem}
.card>h2:first-child{margin-top:0}.upload-status{margin:0;align-self:center}.upload-status:empty{display:none}
pre.example{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:.6rem .9rem;overflow-x:auto}
dl.counts{display:grid;grid-template-columns:max-content max-content;gap:.2rem 1rem}dl.counts dt{font-weight:600}dl.counts dd{margin:0}
ul.reasons{margin:0;padding-left:1.1rem}tr.import-refused td:nth-child(2){color:var(--danger);font-weight:600}
.warning p{margin:.2rem 0}.nowrap{white-space:nowrap}
details.changes summary{cursor:pointer;color:var(--accent);font-size:.85rem}details.changes table{margin:.3rem 0;width:auto}details.changes th,details.changes td{padding:.2rem .5rem;font-size:.85rem}
details.changes th[scope=row]{text-transform:none;background:none;color:var(--fg)}del{color:var(--danger)}ins{color:var(--ok);text-decoration:none}table.activity td.actor{overflow-wrap:normal;min-width:9rem}
.tabs ul{display:flex;gap:.25rem;list-style:none;margin:0 0 1rem;padding:0;border-bottom:1px solid var(--line)}
.tabs a{display:block;padding:.4rem .8rem;text-decoration:none}.tabs a[aria-current=page]{border-bottom:2px solid var(--accent);font-weight:600}
.topbar nav ul,.tabs ul{flex-wrap:wrap}main{overflow-wrap:anywhere}input,select,textarea{max-width:100%}fieldset{min-width:0}
.sr-only{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
#f-request-id{width:22rem}.filters{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:flex-end;margin:.5rem 0}.filters .field{margin:0}
.chart{margin:.5rem 0 1rem}.chart svg{max-width:48rem;display:block}.legend{display:inline-flex;align-items:center;gap:.3rem;margin-right:1rem;font-size:.9rem}
td.actions{white-space:nowrap}.invite-link .key-box{margin:.5rem 0}
meter{width:16rem;height:1.2rem;vertical-align:middle}
.badge{display:inline-block;background:#ddf4ff;color:#0550ae;border-radius:999px;padding:0 .55rem;font-size:.8rem}tr.current td{background:#f6fbff}
fieldset.policy{border:1px solid var(--line);border-radius:6px;padding:.4rem .9rem .6rem;margin:.5rem 0 1rem;max-width:40rem}fieldset.policy legend{font-weight:600}fieldset.policy+.hint{margin:0 0 .75rem}
.choice{display:grid;grid-template-columns:auto 1fr;gap:0 .5rem;margin:.5rem 0}.choice .hint{grid-column:2}td.member-actions form{display:block;margin:0 0 .3rem}.status.s2{color:#2f7d4f}.status.s4{color:#a35f00}.status.s5{color:#b3261e}
@media (max-width:48rem){
.topbar{gap:.4rem 1rem;padding:.5rem .75rem}.who{margin-left:0;flex-wrap:wrap;gap:.4rem .75rem}
.nav-title{margin-left:0}.sep{display:none}main{padding:1rem .75rem}
table{display:block;overflow-x:auto;max-width:100%;position:relative}
table.sessions thead{display:none}table.sessions tr{display:block;border-bottom:1px solid var(--line);padding:.4rem 0}table.sessions td{display:block;border:0;padding:.1rem .6rem}
table.sessions td[data-label]::before{content:attr(data-label) ": ";color:var(--muted);font-size:.85rem}td,th{overflow-wrap:normal}.checks{grid-template-columns:1fr}.field{max-width:100%}
}
.passkey-sign-in{margin-top:1rem;padding-top:1rem;border-top:1px solid var(--line)}.passkey-sign-in button{width:100%}[data-passkey-status]:empty{display:none}
[data-passkey-status]{margin:.5rem 0 0}td.actions details.rename{display:inline-block;margin-right:.5rem;vertical-align:middle}details.rename summary{cursor:pointer;color:var(--accent)}
details.rename[open]{display:block;margin:0 0 .5rem}details.rename form{display:flex;flex-wrap:wrap;gap:.4rem;align-items:center;margin-top:.4rem}
@media (max-width:48rem){table.passkeys,table.passkeys tbody,table.passkeys tr,table.passkeys td{display:block}table.passkeys thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%)}
table.passkeys tr{border-bottom:1px solid var(--line);padding:.5rem 0}table.passkeys td{border:0;padding:.1rem 0;white-space:normal}table.passkeys td[data-label]::before{content:attr(data-label) ": ";color:var(--muted);font-size:.85rem}}
/* issue 32 frictions: the bulk box's hidden pickers */
.bulk [data-bulk-for][hidden]{display:none}
form.log-filters{gap:.75rem 1rem}form.log-filters .field{flex:1 1 12rem;max-width:none}form.log-filters .field.wide{flex:2 1 16rem}
form.log-filters input,form.log-filters select,form.log-filters #f-request-id{width:100%}form.log-filters[role=search] .field.wide{flex:0 1 28rem}
.empty-state{border:1px dashed var(--line);border-radius:6px;padding:.8rem 1rem;margin:.5rem 0 1rem}.empty-state p{margin:0}.empty-state .empty-title{font-weight:600}
code.wrap{word-break:break-all}svg.qr{display:block;max-width:100%;height:auto}form.again{margin-top:1rem}ul.codes{list-style:none;padding:0;display:grid;grid-template-columns:repeat(auto-fill,minmax(9rem,1fr));gap:.4rem;font-size:1.1rem}
ul.stats{list-style:none;margin:0 0 1rem;padding:0;display:grid;grid-template-columns:repeat(auto-fit,minmax(6.5rem,1fr));gap:.6rem}
ul.stats a{display:block;border:1px solid var(--line);border-radius:8px;padding:.6rem .8rem;text-decoration:none;color:var(--fg)}ul.stats a:hover{border-color:var(--accent)}
.stat-number{display:block;font-size:1.5rem;line-height:1.2;font-variant-numeric:tabular-nums}.stat-label{color:var(--muted)}
ol.steps{list-style:none;margin:.5rem 0;padding:0}ol.steps li{display:flex;gap:.6rem;align-items:flex-start;padding:.4rem 0}
.step-mark{flex:none;width:1.4rem;height:1.4rem;border-radius:50%;border:2px solid var(--line);text-align:center;line-height:1.1rem;font-size:.85rem}
ol.steps li.done .step-mark{background:var(--ok);border-color:var(--ok);color:#fff}ol.steps li.done strong{color:var(--muted)}
.usage-chart{margin:.5rem 0}.usage-chart svg.usage-bars{display:block;width:100%;height:8rem;max-width:none}.usage-total{margin:0 0 .4rem}
.usage-axis{display:flex;justify-content:space-between;font-size:.85rem;color:var(--muted)}table.usage-days td,table.usage-days th{font-variant-numeric:tabular-nums}
`;

export const JS = `
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
