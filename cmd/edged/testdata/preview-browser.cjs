'use strict';
// preview-browser.cjs drives headless Chromium (playwright-core, with the
// system's browser: npm downloads none) through edged's live preview page,
// for TestPreviewPageInChromium:
//
//   node preview-browser.cjs PLAYWRIGHT_CORE_DIR CHROMIUM URL WANT SCREENSHOT.png [WORDS]
//
// It loads URL, waits until the page shows WANT pictures (img.live), each
// loaded, and then until every one has changed: a later picture (its
// data-picture number) whose pixels differ from the first one's, and
// until the page's text holds every one of WORDS (comma-separated, any
// case: the status fields fill in as status.json's windows do). It then
// saves a screenshot and prints, as one JSON line, what it saw: each
// picture's address, size, first and last picture and frame_seq, whether
// its pixels changed; the requests the page made; its errors.
const [pwDir, executablePath, url, want, screenshot, words = ''] = process.argv.slice(2);
const { chromium } = require(pwDir);

// pixels sums a picture's pixels, as drawn into a canvas, in 64 strides:
// two different pictures of a moving scene differ. It answers null while
// any picture is between two (the page swapping in the next one), so that
// sample can ask again.
function pixels() {
  const imgs = [...document.querySelectorAll('img.live')];
  if (!imgs.every((img) => img.complete && img.naturalWidth > 0)) return null;
  return imgs.map((img) => {
    const c = document.createElement('canvas');
    c.width = img.naturalWidth;
    c.height = img.naturalHeight;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    const sums = new Array(64).fill(0);
    for (let i = 0; i < d.length; i++) sums[i % 64] += d[i];
    return {
      src: img.closest('article').querySelector('.name').textContent + '/' + img.alt,
      picture: Number(img.dataset.picture || 0),
      seq: Number(img.dataset.frameSeq || 0),
      width: img.naturalWidth,
      height: img.naturalHeight,
      sums,
    };
  });
}

// sample reads every picture's pixels at one moment when all are loaded,
// asking again for up to 30 s.
async function sample(page) {
  const end = Date.now() + 30000;
  for (;;) {
    const p = await page.evaluate(pixels);
    if (p !== null) return p;
    if (Date.now() > end) throw new Error('in 30 s the pictures were never all loaded at once');
    await new Promise((ok) => setTimeout(ok, 20));
  }
}

(async () => {
  const browser = await chromium.launch({
    executablePath,
    headless: true,
    // Root (CI) needs --no-sandbox; there is no GPU.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const out = { pictures: [], requests: [], errors: [] };
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 760 } });
    page.on('request', (r) => out.requests.push(r.url()));
    page.on('pageerror', (e) => out.errors.push('page: ' + e.message));
    page.on('console', (m) => { if (m.type() === 'error') out.errors.push('console: ' + m.text()); });
    await page.goto(url, { waitUntil: 'load' });
    const n = Number(want);
    await page.waitForFunction((n) => {
      const imgs = [...document.querySelectorAll('img.live')];
      return imgs.length === n && imgs.every((i) => i.complete && i.naturalWidth > 0 && Number(i.dataset.picture) > 0);
    }, n, { timeout: 30000 });
    const first = await sample(page);
    await page.waitForFunction((first) => {
      const imgs = [...document.querySelectorAll('img.live')];
      return imgs.length === first.length &&
        imgs.every((img, i) => img.complete && Number(img.dataset.picture) > first[i].picture + 1);
    }, first, { timeout: 30000 });
    const last = await sample(page);
    // The latency and rate fields fill in once status.json has a window.
    await page.waitForFunction(() => [...document.querySelectorAll('article dd')].every((d) => d.textContent !== ''), null, { timeout: 10000 });
    const wanted = words.split(',').filter((w) => w !== '').map((w) => w.toLowerCase());
    try {
      await page.waitForFunction((wanted) => {
        const text = document.body.innerText.toLowerCase();
        return wanted.every((w) => text.includes(w));
      }, wanted, { timeout: 20000 });
    } catch (e) {
      const text = (await page.evaluate(() => document.body.innerText)).toLowerCase();
      out.errors.push('driver: in 20 s the page never said ' + wanted.filter((w) => !text.includes(w)).map((w) => JSON.stringify(w)).join(', '));
    }
    for (let i = 0; i < first.length; i++) {
      const a = first[i], b = last[i];
      out.pictures.push({
        src: b.src, width: b.width, height: b.height,
        first: a.picture, last: b.picture, firstSeq: a.seq, lastSeq: b.seq,
        changed: a.sums.some((v, j) => v !== b.sums[j]),
      });
    }
    out.text = await page.evaluate(() => document.body.innerText);
    await page.screenshot({ path: screenshot, type: 'png' });
  } catch (e) {
    out.errors.push('driver: ' + e.message);
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
})();
