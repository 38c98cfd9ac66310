// A receipt's lines, total and end reason as both pages show them: the rider's ride modal
// (app.js) and the console's ride detail (ops/detail.js) fill the same table shape
// (tbody rows of <th scope=row> label and <td> amount, a total cell in the tfoot).
import * as I from './i18n.js';

/**
 * Fills `els` from a receipt in the page's language.
 * - els: {lines: <tbody>, total: <td>, reason: <p>}
 * - receipt: the server's receipt ({lines, fare, currency, reason}); plan: the ride's plan
 *   (a pause line of 0 is left out on a plan that does not bill pauses, see I.receiptRows).
 * Every amount carries its minor units in data-minor, every row its line's label in data-label.
 */
export function renderReceipt(els, lang, receipt, plan) {
  const body = els.lines;
  body.textContent = '';
  for (const ln of I.receiptRows(lang, receipt, plan)) {
    const tr = document.createElement('tr');
    tr.dataset.label = ln.label;
    const th = document.createElement('th');
    th.scope = 'row';
    th.textContent = ln.text;
    const td = document.createElement('td');
    td.textContent = I.money(lang, ln.amount, receipt.currency);
    td.dataset.minor = String(ln.amount);
    tr.append(th, td);
    body.append(tr);
  }
  els.total.textContent = I.money(lang, receipt.fare, receipt.currency);
  els.total.dataset.minor = String(receipt.fare);
  els.reason.textContent = receipt.reason ? I.t(lang, 'receipt.reason.' + receipt.reason) : '';
}
