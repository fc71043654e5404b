// memory_viewer.js - XProf's Memory Viewer for one hbm plan, drawn from HBM_DATA
// (hbm plan --html / hbm view --html: the JSON of hbm view --json with the heap curves,
// every temp buffer and the instruction names). No network, no library.
(function () {
  'use strict';
  const D = HBM_DATA;
  // the SVG namespace's name (an identifier, never fetched), spelled so that the page
  // holds no URL: the tests check that nothing outside the page is referred to
  const NS = ['http:', '', 'www.w3.org', '2000', 'svg'].join('/');
  const COLORS = ['#e91e63', '#2196f3', '#81c784', '#4dd0e1', '#3f51b5', '#e53935', '#ff9100', '#b39ddb',
    '#90a4ae', '#26c6da', '#ad1457', '#03a9f4', '#c2185b', '#795548', '#f9a825', '#00bfa5', '#880e4f',
    '#d500f9', '#ce93d8', '#ec407a', '#4caf50', '#ff8f00', '#ffca28', '#ab47bc'];
  const $ = (id) => document.getElementById(id);
  function human(b) {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0, v = b;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(2) : String(v)) + u[i];
  }
  function el(tag, attrs, parent) {
    const e = tag.startsWith('svg:') ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === 'text') e.textContent = attrs[k]; else e.setAttribute(k, attrs[k]);
    }
    if (parent) parent.appendChild(e);
    return e;
  }
  function setBytes(id, b, extra) {
    const e = $(id);
    e.textContent = human(b) + (extra || '');
    e.setAttribute('data-bytes', String(b));
    e.title = b + ' bytes';
  }
  $('module').textContent = D.module;
  $('meta').textContent = D.backend + ' backend, ' + D.schedule_steps + ' schedule steps' +
    (D.estimate ? ' (ESTIMATE: the module is not scheduled)' : '');
  const sel = $('space');
  D.memory_spaces.forEach((s, i) => el('option', {value: i, text: s.name}, sel));
  let S = D.memory_spaces[0], by = 0, hoverSpan = null;

  function overview() {
    setBytes('ov-total', S.total_allocation_bytes);
    setBytes('ov-peak', S.peak_heap_bytes);
    setBytes('ov-padding', S.padding_overhead_bytes);
    setBytes('ov-args', S.argument_bytes);
    setBytes('ov-temp', S.hlo_temp_bytes);
    setBytes('ov-temp-nofrag', S.hlo_temp_without_fragmentation_bytes);
    const f = $('ov-frag');
    f.textContent = (100 * S.fragmentation).toFixed(1) + '% (' + human(S.fragmentation_bytes) + ')';
    f.setAttribute('data-bytes', String(S.fragmentation_bytes));
    $('ov-peak-at').textContent = 'step ' + S.peak_step + ': ' + S.peak_instruction;
  }

  // --- Memory Allocation Size vs. Program Order ------------------------------------------
  const CW = 1100, CH = 300, L = 70, R = 10, T = 10, B = 60;
  function chart() {
    const svg = $('chart');
    svg.textContent = '';
    const n = S.heap_sizes.length, top = Math.max(1, S.peak_heap_bytes);
    const x = (t) => L + (n > 1 ? t * (CW - L - R) / (n - 1) : 0);
    const y = (v) => T + (CH - T - B) * (1 - v / top);
    const step = Math.max(1, Math.floor(n / 2000)); // at most ~2000 points per line
    function line(arr, color, dash) {
      let d = '';
      for (let t = 0; t < n; t += step) {
        let v = arr[t];
        for (let k = t; k < Math.min(n, t + step); k++) v = Math.max(v, arr[k]);
        d += (d ? 'L' : 'M') + x(t).toFixed(1) + ' ' + y(v).toFixed(1);
      }
      el('svg:path', {d: d, fill: 'none', stroke: color, 'stroke-width': 1.5, 'stroke-dasharray': dash || ''}, svg);
    }
    for (let k = 0; k <= 4; k++) {
      const v = top * k / 4;
      el('svg:line', {x1: L, x2: CW - R, y1: y(v), y2: y(v), stroke: '#eee'}, svg);
      el('svg:text', {x: L - 6, y: y(v) + 4, 'text-anchor': 'end', text: human(Math.round(v))}, svg);
    }
    line(S.heap_sizes, '#1a73e8');
    line(S.unpadded_heap_sizes, '#2e7d32', '5 4');
    // the peak
    const px = x(S.peak_step);
    el('svg:line', {x1: px, x2: px, y1: T, y2: CH - B, stroke: '#d93025', 'stroke-dasharray': '3 3', id: 'peak-line'}, svg);
    el('svg:circle', {cx: px, cy: y(S.peak_heap_bytes), r: 4, fill: '#d93025'}, svg);
    el('svg:text', {x: Math.min(px + 6, CW - 200), y: T + 12, fill: '#d93025',
      text: 'peak ' + human(S.peak_heap_bytes) + ' at ' + S.peak_instruction}, svg);
    // instruction names on the axis: a few ticks
    const ticks = Math.min(n, 5);
    for (let k = 0; k < ticks; k++) {
      const t = ticks > 1 ? Math.round(k * (n - 1) / (ticks - 1)) : 0;
      const name = D.instructions[t] || '';
      el('svg:text', {x: x(t), y: CH - B + 14, 'text-anchor': k === 0 ? 'start' : k === ticks - 1 ? 'end' : 'middle',
        text: t + ' ' + (name.length > 18 ? name.slice(0, 17) + '…' : name)}, svg);
    }
    el('svg:text', {x: L, y: CH - B + 30, text: 'heap size (solid), unpadded heap size (dashed)'}, svg);
    if (hoverSpan) {
      const b = hoverSpan;
      el('svg:rect', {x: x(b.start), y: y(b.size), width: Math.max(2, x(Math.max(b.start, b.end - 1)) - x(b.start)),
        height: CH - B - y(b.size), fill: 'rgba(233,30,99,.25)', stroke: '#e91e63', id: 'lifetime'}, svg);
    }
    const tip = $('tip');
    svg.onmousemove = (ev) => {
      const r = svg.getBoundingClientRect();
      const t = Math.max(0, Math.min(n - 1, Math.round((ev.clientX - r.left - L) * (n - 1) / (CW - L - R))));
      tip.style.display = 'block';
      tip.style.left = (ev.clientX - r.left + 12) + 'px';
      tip.style.top = (ev.clientY - r.top + 12) + 'px';
      tip.textContent = 'step ' + t + ' ' + (D.instructions[t] || '') + ': heap ' + human(S.heap_sizes[t]) +
        ', unpadded ' + human(S.unpadded_heap_sizes[t]);
    };
    svg.onmouseleave = () => { tip.style.display = 'none'; };
  }

  // --- ops at the peak -----------------------------------------------------------------------
  function card(b) {
    const c = $('card');
    if (!b) { c.innerHTML = '<em>Hover a buffer to see its details.</em>'; return; }
    c.textContent = '';
    const row = (k, v) => { const d = el('div', {}, c); el('b', {text: k}, d); d.appendChild(document.createTextNode(v)); };
    row('instruction', b.instruction + (b.opcode ? ' (' + b.opcode + ')' : ''));
    row('size', human(b.size) + ' (' + b.size + ' B)');
    row('unpadded', human(b.unpadded_size));
    row('padding', human(b.padding) + (b.unpadded_size ? ' (' + (b.size / b.unpadded_size).toFixed(2) + 'x)' : ''));
    row('shape', b.shape);
    row('allocation', b.allocation_type);
    row('lifetime', b.allocation_type === 'Temporary' ? 'steps [' + b.start + ', ' + b.end + ')' : 'the whole program');
    if (b.op_name) row('op_name', b.op_name);
    if (b.source_file) row('source', b.source_file + ':' + b.source_line);
  }
  function hover(b) {
    card(b);
    hoverSpan = b && b.allocation_type === 'Temporary' ? b : null;
    chart();
  }
  function ops() {
    const list = S.max_heap.map((b, i) => Object.assign({color: COLORS[i % COLORS.length]}, b));
    if (by === 1) list.sort((a, b) => b.size - a.size);
    if (by === 2) list.sort((a, b) => b.padding - a.padding);
    const tb = $('ops').tBodies[0];
    tb.textContent = '';
    const blocks = $('blocks');
    blocks.textContent = '';
    const total = Math.max(1, S.peak_heap_bytes);
    list.forEach((b, i) => {
      const tr = el('tr', {'data-size': b.size}, tb);
      el('td', {class: 'n', text: i + 1}, tr);
      const td = el('td', {class: 'n'}, tr);
      el('span', {class: 'sw', style: 'background:' + b.color}, td);
      td.appendChild(document.createTextNode(human(b.size)));
      el('td', {class: 'n', text: human(b.unpadded_size)}, tr);
      el('td', {class: 'n', text: human(b.padding)}, tr);
      el('td', {text: b.allocation_type}, tr);
      el('td', {text: b.instruction, title: b.instruction}, tr);
      el('td', {text: b.shape, title: b.shape}, tr);
      el('td', {text: b.op_name, title: b.op_name}, tr);
      tr.onmouseenter = () => hover(b);
      const blk = el('div', {style: 'width:' + (100 * b.size / total) + '%;background:' + b.color,
        title: b.instruction + ' ' + human(b.size)}, blocks);
      blk.onmouseenter = () => hover(b);
    });
    if (S.small_count) {
      const tr = el('tr', {'data-size': S.small_bytes, class: 'small'}, tb);
      el('td', {class: 'n', text: ''}, tr);
      el('td', {class: 'n', text: human(S.small_bytes)}, tr);
      el('td', {colspan: 6, text: 'small (<' + D.small_buffer_size + ' bytes): ' + S.small_count + ' buffers'}, tr);
      el('div', {style: 'width:' + (100 * S.small_bytes / total) + '%;background:#bdbdbd', title: 'small buffers'}, blocks);
    }
  }

  // --- buffer allocation timeline ---------------------------------------------------------------
  function allocTimeline() {
    const svg = $('alloc');
    svg.textContent = '';
    const W = 1100, H = 360, l = 70, r = 10, t = 10, b = 24;
    const n = Math.max(1, D.schedule_steps);
    const bufs = S.buffers;
    let extent = 1;
    bufs.forEach((x) => { extent = Math.max(extent, x[0] + x[1]); });
    const sx = (W - l - r) / n, sy = (H - t - b) / extent;
    el('svg:rect', {x: l, y: t, width: W - l - r, height: H - t - b, fill: '#fafafa', stroke: '#dadce0'}, svg);
    const peakIds = new Set(S.max_heap.map((x) => x.offset + ':' + x.start));
    const max = Math.min(bufs.length, 20000);
    for (let i = 0; i < max; i++) {
      const [off, size, s, e] = bufs[i];
      const h = size * sy;
      if (h < 0.3) continue;
      const rc = el('svg:rect', {x: l + s * sx, y: t + off * sy, width: Math.max(1, (e - s) * sx), height: Math.max(1, h),
        fill: peakIds.has(off + ':' + s) ? '#e91e63' : COLORS[i % COLORS.length], 'fill-opacity': 0.75}, svg);
      el('svg:title', {text: human(size) + ' at offset ' + off + ', steps [' + s + ', ' + e + ')'}, rc);
    }
    el('svg:text', {x: l - 6, y: t + 10, 'text-anchor': 'end', text: '0'}, svg);
    el('svg:text', {x: l - 6, y: H - b, 'text-anchor': 'end', text: human(extent)}, svg);
    el('svg:text', {x: l, y: H - 8, text: 'step 0'}, svg);
    el('svg:text', {x: W - r, y: H - 8, 'text-anchor': 'end', text: 'step ' + (n - 1)}, svg);
    const px = l + S.peak_step * sx;
    el('svg:line', {x1: px, x2: px, y1: t, y2: H - b, stroke: '#d93025', 'stroke-dasharray': '3 3'}, svg);
  }

  function render() { overview(); chart(); ops(); allocTimeline(); }
  sel.onchange = () => { S = D.memory_spaces[+sel.value]; hoverSpan = null; card(null); render(); };
  document.querySelectorAll('.tabs button').forEach((btn) => {
    btn.onclick = () => {
      by = +btn.getAttribute('data-by');
      document.querySelectorAll('.tabs button').forEach((x) => x.classList.toggle('on', x === btn));
      ops();
    };
  });
  render();
  document.body.setAttribute('data-ready', '1');
  if (location.hash === '#selftest') { // driven by tests/test_plan_view.sh through DOM events
    const res = [];
    const ok = (k, c) => res.push(k + ':' + (c ? 'ok' : 'bad'));
    const rows = () => Array.from($('ops').tBodies[0].rows).filter((r) => !r.classList.contains('small'));
    document.querySelector('.tabs button[data-by="1"]').click();
    const sizes = rows().map((r) => +r.getAttribute('data-size'));
    ok('bysize', sizes.every((v, i) => !i || sizes[i - 1] >= v));
    const tmp = rows().find((r) => r.cells[4].textContent === 'Temporary');
    if (tmp) {
      tmp.dispatchEvent(new MouseEvent('mouseenter'));
      ok('lifetime', !!$('lifetime') && $('card').textContent.indexOf('steps [') >= 0);
    }
    if (D.memory_spaces.length > 1) {
      sel.value = String(D.memory_spaces.length - 1);
      sel.dispatchEvent(new Event('change'));
      ok('space', $('ov-total').getAttribute('data-bytes') === String(S.total_allocation_bytes));
      sel.value = '0';
      sel.dispatchEvent(new Event('change'));
    }
    document.body.setAttribute('data-selftest', res.join(' '));
  }
  if (location.hash === '#hover' && S.max_heap.length) { // for screenshots: a buffer's lifetime drawn
    const tmp = S.max_heap.filter((b) => b.allocation_type === 'Temporary').sort((a, b) => b.size - a.size);
    hover(tmp.length ? tmp[0] : S.max_heap[0]);
  }
})();
