/**
 * Accessibility basics of what a page shows now, as a script for the browser to evaluate (it runs
 * there, not here): the document's language and a heading; a name for every control, link and
 * progress bar; text at 4.5:1 contrast or more (WCAG AA) against the background it is drawn on.
 * Evaluates to the list of problems found.
 */
export const ACCESSIBILITY_PROBLEMS = `(() => {
  const problems = [];
  const describe = (element) => element.tagName.toLowerCase() + (element.id ? '#' + element.id : '') + ' "' + (element.textContent || '').trim().slice(0, 40) + '"';
  if (!document.documentElement.lang) problems.push('the document has no lang');
  if (!document.querySelector('h1')) problems.push('the page has no h1');
  const visible = (element) => {
    const box = element.getBoundingClientRect();
    const style = getComputedStyle(element);
    return box.width > 0 && box.height > 0 && style.visibility !== 'hidden' && style.display !== 'none';
  };
  for (const input of document.querySelectorAll('input, select, textarea')) {
    if (input.type === 'hidden') continue;
    if ((input.labels ? input.labels.length : 0) === 0 && !input.getAttribute('aria-label') && !input.getAttribute('aria-labelledby')) problems.push('no label: ' + describe(input));
  }
  for (const element of document.querySelectorAll('button, a[href], progress')) {
    const name = element.getAttribute('aria-label') || (element.textContent || '').trim();
    if (!name) problems.push('no accessible name: ' + describe(element));
  }
  const channel = (value) => {
    const c = value / 255;
    return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
  };
  const parse = (color) => (color.match(/[\\d.]+/g) || []).map(Number);
  const luminance = (rgb) => 0.2126 * channel(rgb[0]) + 0.7152 * channel(rgb[1]) + 0.0722 * channel(rgb[2]);
  const background = (element) => {
    for (let at = element; at; at = at.parentElement) {
      const rgba = parse(getComputedStyle(at).backgroundColor);
      if (rgba.length < 4 || rgba[3] > 0) return rgba;
    }
    return [255, 255, 255];
  };
  for (const element of document.querySelectorAll('body *')) {
    const ownText = [...element.childNodes].some((node) => node.nodeType === Node.TEXT_NODE && (node.textContent || '').trim());
    if (!ownText || !visible(element)) continue;
    const fg = luminance(parse(getComputedStyle(element).color));
    const bg = luminance(background(element));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    if (ratio < 4.5) problems.push('contrast ' + ratio.toFixed(2) + ':1: ' + describe(element));
  }
  return problems;
})()`;
