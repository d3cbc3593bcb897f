// edged's live preview page: /status.json every second, and each camera's
// latest picture as it comes (/preview/<pipeline>/<source>.jpg?after=N
// waits for the picture after N). Read-only: nothing here changes edged.
'use strict';

const cards = new Map();    // pipeline name -> card
const pictures = new Map(); // picture address -> its loop
let statusFailed = false;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(v, digits) {
  return (v === undefined || v === null || Number.isNaN(v)) ? '–' : v.toFixed(digits);
}

function bytes(n) {
  return n >= 1 << 30 ? (n / (1 << 30)).toFixed(1) + ' GiB' : (n / (1 << 20)).toFixed(0) + ' MiB';
}

// A picture loop fetches one camera's pictures one after the other and
// shows each in its <img>; it stops when its card goes away.
function startPicture(src, box) {
  const img = el('img');
  img.alt = src.name;
  img.className = 'live';
  const note = el('div', 'note');
  box.append(img, note);
  const loop = { stopped: false, url: null, n: 0, img, note };
  pictures.set(src.picture, loop);
  (async () => {
    while (!loop.stopped) {
      let wait = 0;
      try {
        const r = await fetch(src.picture + '?after=' + loop.n, { cache: 'no-store' });
        if (r.ok) {
          const n = Number(r.headers.get('X-Edged-Picture')) || 0;
          const seq = r.headers.get('X-Edged-Frame-Seq');
          const blob = await r.blob();
          const url = URL.createObjectURL(blob);
          // Decoded off screen first: then the swap is at once, and the
          // <img> never shows an empty picture in between.
          const next = new Image();
          next.src = url;
          try { await next.decode(); } catch (e) { /* a broken picture: shown as the browser shows it */ }
          await new Promise((ok) => {
            img.onload = ok; img.onerror = ok; img.src = url;
            if (img.complete) ok();
          });
          if (loop.url) URL.revokeObjectURL(loop.url);
          loop.url = url;
          loop.n = n;
          img.dataset.picture = String(n);
          img.dataset.frameSeq = seq || '';
          note.textContent = '';
        } else {
          note.textContent = (await r.text()).trim();
          wait = r.status === 503 ? 1000 * (Number(r.headers.get('Retry-After')) || 1) : 3000;
        }
      } catch (e) {
        note.textContent = 'edged does not answer';
        wait = 2000;
      }
      if (wait) await new Promise((ok) => setTimeout(ok, wait));
    }
    if (loop.url) URL.revokeObjectURL(loop.url);
  })();
  return loop;
}

function makeCard(p) {
  const card = el('article', 'card');
  const h = el('h2');
  const name = el('span', 'name', p.name);
  const badge = el('span', 'badge');
  h.append(name, badge);
  const pics = el('div', 'pictures');
  const dl = el('dl');
  const fields = {};
  for (const [key, label] of [['fps', 'rate'], ['latency', 'latency'], ['engine', 'engine'], ['source', 'camera'], ['results', 'results']]) {
    const dd = el('dd');
    dl.append(el('dt', '', label), dd);
    fields[key] = dd;
  }
  const links = el('div', 'links');
  card.append(h, pics, dl, links);
  document.getElementById('pipelines').append(card);
  const c = { card, badge, pics, fields, links, sources: new Map() };
  cards.set(p.name, c);
  return c;
}

function updateCard(c, p) {
  c.badge.textContent = p.state;
  c.badge.className = 'badge ' + p.state;
  c.card.dataset.state = p.state;
  const f = c.fields;
  f.fps.textContent = fmt(p.fps, 1) + ' fps' + (p.requested_fps > 0 ? ' of ' + fmt(p.requested_fps, 0) : '');
  if (p.throttled) f.fps.textContent += ' — ' + p.throttled;
  f.latency.textContent = p.latency
    ? 'p50 ' + fmt(p.latency.p50_ms, 1) + ' ms · p99 ' + fmt(p.latency.p99_ms, 1) + ' ms'
    : '–';
  f.engine.textContent = '';
  if (p.engine) {
    f.engine.append(p.engine.model + ' · ' + p.engine.backend + ' · gen ' + p.engine.generation + ' ', el('code', '', p.engine.sha256));
  } else {
    f.engine.textContent = '–';
  }
  f.source.textContent = '';
  for (const s of p.sources) {
    if (f.source.childNodes.length) f.source.append(', ');
    f.source.append(s.name + ' ', el('span', s.up ? 'up' : 'down', s.up ? 'up' : 'down'));
    if (!s.up && s.reason) f.source.append(': ' + s.reason);
    if (s.format) f.source.append(' ', el('code', '', s.format));
  }
  f.results.textContent = p.results + (p.dropped ? ' (' + p.dropped + ' frames dropped)' : '') + (p.reason ? ' — ' + p.reason : '');
  c.pics.classList.toggle('many', p.sources.length > 1);
  const seen = new Set();
  for (const s of p.sources) {
    seen.add(s.picture);
    if (!c.sources.has(s.picture)) {
      const box = el('div', 'picture');
      if (p.sources.length > 1) box.append(el('span', 'src', s.name));
      c.pics.append(box);
      c.sources.set(s.picture, { box, loop: startPicture(s, box) });
    }
  }
  for (const [url, s] of c.sources) {
    if (!seen.has(url)) { s.loop.stopped = true; pictures.delete(url); s.box.remove(); c.sources.delete(url); }
  }
  c.links.textContent = '';
  for (const s of p.sources) {
    const a = el('a', '', (p.sources.length > 1 ? s.name + ' ' : '') + 'MJPEG stream');
    a.href = s.stream;
    a.target = '_blank';
    c.links.append(a);
  }
}

function chip(text, cls) {
  return el('span', 'chip' + (cls ? ' ' + cls : ''), text);
}

function updateBoard(b) {
  const box = document.getElementById('board');
  box.textContent = '';
  if (!b) { box.hidden = true; return; }
  box.hidden = false;
  if (b.power_mode) box.append(chip('power mode ' + b.power_mode));
  for (const t of b.throttling || []) box.append(chip(t, 'bad'));
  for (const z of b.zones || []) {
    const hot = z.passive && z.celsius >= z.passive - 5;
    box.append(chip(z.name + ' ' + fmt(z.celsius, 1) + ' °C', hot ? 'warn' : ''));
  }
  if (b.gpu_load !== undefined) box.append(chip('GPU ' + fmt(100 * b.gpu_load, 0) + ' %'));
  if (b.memory_available_bytes) {
    box.append(chip('memory ' + bytes(b.memory_available_bytes) + ' free of ' + bytes(b.memory_total_bytes), b.pressure ? 'bad' : ''));
  }
  if (b.pressure) box.append(chip('memory pressure: ' + b.pressure, 'bad'));
  for (const r of b.rails || []) box.append(chip(r.name + ' ' + fmt(r.watts, 1) + ' W'));
  if (!box.childNodes.length) box.append(chip('no board sensors found', ''));
}

function update(st) {
  document.getElementById('device').textContent = st.device;
  document.getElementById('version').textContent = st.version;
  document.getElementById('fps').textContent = st.preview.fps;
  document.getElementById('width').textContent = st.preview.width;
  document.getElementById('clients').textContent = st.preview.clients;
  document.title = 'edged — ' + st.device;
  const problem = document.getElementById('problem');
  const warn = st.problem || st.preview.warning || '';
  problem.hidden = !warn;
  problem.textContent = warn;
  updateBoard(st.board);
  const seen = new Set();
  for (const p of st.pipelines) {
    seen.add(p.name);
    updateCard(cards.get(p.name) || makeCard(p), p);
  }
  for (const [name, c] of cards) {
    if (seen.has(name)) continue;
    for (const s of c.sources.values()) { s.loop.stopped = true; }
    c.card.remove();
    cards.delete(name);
  }
}

async function refresh() {
  try {
    const r = await fetch('/status.json', { cache: 'no-store' });
    if (!r.ok) throw new Error((await r.text()).trim());
    update(await r.json());
    statusFailed = false;
  } catch (e) {
    if (!statusFailed) {
      const problem = document.getElementById('problem');
      problem.hidden = false;
      problem.textContent = 'edged does not answer: ' + e.message;
    }
    statusFailed = true;
  }
}

function tick() {
  document.getElementById('clock').textContent = new Date().toLocaleString();
}

refresh();
tick();
setInterval(refresh, 1000);
setInterval(tick, 1000);
