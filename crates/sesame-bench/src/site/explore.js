// The interactive page over every result set of a run (explore.html): pick
// an experiment, filter its rows by parameter, toggle the paper's values
// and the axes' scale, sort the table by a column. The data is inlined in
// <script id="sesame-data" type="application/json">; nothing is fetched.
// With the fragment #selfcheck the page exercises itself and writes its
// verdict into a pre element with the id selfcheck.
(function () {
  'use strict';
  var SVG = 'http://www.w3.org/2000/svg';
  // The report pages' palette (plot.rs PALETTE: colour-blind safe, no
  // yellow) and each scheme's site-wide colour, inlined by explore.rs.
  var SITE = JSON.parse(document.getElementById('sesame-colours').textContent);
  var COLOURS = SITE.palette;
  var W = 640;
  var H = 380;
  var LEGEND = 280;
  var M = { left: 78, right: 16, top: 16, bottom: 56 };

  var DATA = JSON.parse(document.getElementById('sesame-data').textContent);
  var state = { exp: 0, filters: {}, paper: true, axes: 'report', sort: null };

  // An element `e` with `attrs`, text `content`, appended to `parent`.
  function fill(e, attrs, parent, content) {
    Object.keys(attrs || {}).forEach(function (k) {
      e.setAttribute(k, attrs[k]);
    });
    if (content !== undefined) {
      e.textContent = content;
    }
    if (parent) {
      parent.appendChild(e);
    }
    return e;
  }
  function h(tag, attrs, parent, content) {
    return fill(document.createElement(tag), attrs, parent, content);
  }
  function s(tag, attrs, parent, content) {
    return fill(document.createElementNS(SVG, tag), attrs, parent, content);
  }

  // --- Rows, filters and series, as the Rust report draws them.

  function same(a, b) {
    return String(a) === String(b);
  }
  function selects(chart, row) {
    return (chart.filter || []).every(function (f) {
      return row.params[f[0]] !== undefined && same(row.params[f[0]], f[1]);
    });
  }
  function number(row, name) {
    var v = row.params[name];
    if (typeof v === 'number') {
      return v;
    }
    if (v === undefined && typeof row.figures[name] === 'number') {
      return row.figures[name];
    }
    return null;
  }
  function passes(row) {
    return Object.keys(state.filters).every(function (k) {
      var want = state.filters[k];
      return want === '' || (row.params[k] !== undefined && same(row.params[k], want));
    });
  }
  function visibleRows(rs) {
    return rs.rows.filter(passes);
  }
  function label(row, chart, y) {
    var parts = [];
    (chart.series || []).forEach(function (p) {
      if (row.params[p] !== undefined) {
        parts.push(p + '=' + row.params[p]);
      }
    });
    if (chart.y.length > 1 || parts.length === 0) {
      parts.push(y);
    }
    return parts.join(' ');
  }
  function logs(chart) {
    if (state.axes === 'linear') {
      return { x: false, y: false };
    }
    if (state.axes === 'log') {
      return { x: chart.x_axis.log, y: true };
    }
    return { x: chart.x_axis.log, y: chart.y_axis.log };
  }
  function paperValue(row, name) {
    var p = (row.paper || []).filter(function (q) {
      return q.name === name;
    })[0];
    return p ? p.value : null;
  }

  // The series of `chart` over `rows`: { cats, series: [{label, paper,
  // points: [[x, y]]}] }; cats is the list of categories when x is a word.
  function seriesOf(chart, rows, log) {
    var chosen = rows.filter(function (r) {
      return selects(chart, r);
    });
    var cats = null;
    chosen.forEach(function (r) {
      var v = r.params[chart.x];
      if (typeof v === 'string') {
        cats = cats || [];
        if (cats.indexOf(v) < 0) {
          cats.push(v);
        }
      }
    });
    var out = [];
    function add(lab, paper, point, key) {
      var found = out.filter(function (x) {
        return x.label === lab;
      })[0];
      if (!found) {
        found = { label: lab, paper: paper, points: [], key: key };
        out.push(found);
      }
      found.points.push(point);
    }
    chosen.forEach(function (r) {
      var x = cats ? cats.indexOf(String(r.params[chart.x])) : number(r, chart.x);
      if (x === null || x < 0 || (!cats && log.x && x <= 0)) {
        return;
      }
      chart.y.forEach(function (y) {
        var pairs = [[r.figures[y], false]];
        if (state.paper) {
          pairs.push([paperValue(r, y), true]);
        }
        pairs.forEach(function (p) {
          var v = p[0];
          if (typeof v !== 'number' || !isFinite(v) || (log.y && v <= 0)) {
            return;
          }
          var first = (chart.series || [])[0];
          var key = first !== undefined && r.params[first] !== undefined ? String(r.params[first]) : y;
          add(label(r, chart, y) + (p[1] ? ' (paper)' : ''), p[1], [x, v], key);
        });
      });
    });
    out.forEach(function (x) {
      x.points.sort(function (a, b) {
        return a[0] - b[0];
      });
    });
    // Each paper series right after ours, in ours' colour; each scheme in
    // its site-wide colour, or the next one this chart does not use yet.
    var ordered = [];
    var used = [];
    out.filter(function (x) { return !x.paper; }).forEach(function (x, i) {
      var c = SITE.keys[x.key];
      c = c === undefined ? i % COLOURS.length : c;
      for (var step = 0; step < COLOURS.length && used.indexOf(c) >= 0; step++) {
        c = (c + 1) % COLOURS.length;
      }
      used.push(c);
      x.colour = COLOURS[c];
      ordered.push(x);
      out.forEach(function (p) {
        if (p.paper && p.label === x.label + ' (paper)') {
          p.colour = x.colour;
          ordered.push(p);
        }
      });
    });
    out.forEach(function (p, i) {
      if (ordered.indexOf(p) < 0) {
        p.colour = COLOURS[(ordered.length + i) % COLOURS.length];
        ordered.push(p);
      }
    });
    return { cats: cats, series: ordered };
  }

  // --- Scales and ticks.

  function extent(values, log) {
    var lo = Infinity;
    var hi = -Infinity;
    values.forEach(function (v) {
      lo = Math.min(lo, v);
      hi = Math.max(hi, v);
    });
    if (!isFinite(lo)) {
      return log ? [1, 10] : [0, 1];
    }
    if (log) {
      return [lo / 1.5, hi * 1.5];
    }
    var pad = Math.max((hi - lo) * 0.05, Math.abs(hi) * 0.05, 1e-9);
    return [lo >= 0 ? 0 : lo - pad, hi + pad];
  }
  function linearTicks(lo, hi) {
    var raw = (hi - lo) / 6;
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var step = [1, 2, 5, 10].map(function (m) {
      return m * p;
    }).filter(function (st) {
      return st >= raw * 0.999;
    })[0];
    var out = [];
    for (var i = Math.ceil(lo / step); i * step <= hi + step * 1e-9; i++) {
      out.push(parseFloat((i * step).toPrecision(12)));
    }
    return out;
  }
  // As plot.rs: powers of ten and their 2 and 5 multiples, more multiples
  // when that gives fewer than four, five spread values inside a decade.
  function logTicks(lo, hi) {
    function withM(ms) {
      var out = [];
      for (var k = Math.floor(Math.log10(lo)); k <= Math.ceil(Math.log10(hi)); k++) {
        ms.forEach(function (m) {
          var v = m * Math.pow(10, k);
          if (v >= lo && v <= hi) {
            out.push(v);
          }
        });
      }
      return out;
    }
    var t = withM([1, 2, 5]);
    if (t.length < 4) {
      t = withM([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }
    if (t.length < 3) {
      t = [];
      for (var i = 0; i < 5; i++) {
        var v = lo * Math.pow(hi / lo, i / 4);
        var sc = Math.pow(10, Math.floor(Math.log10(v)) - 2);
        v = Math.round(v / sc) * sc;
        if (v >= lo && v <= hi && t.indexOf(v) < 0) {
          t.push(v);
        }
      }
    }
    return t;
  }
  function fmt(v) {
    if (v === Math.trunc(v) && Math.abs(v) < 1e15) {
      return Math.abs(v) >= 1e6 ? v.toExponential(0).replace('e+', 'e') : String(v);
    }
    var digits = Math.min(12, Math.max(0, 3 - Math.floor(Math.log10(Math.abs(v)))));
    return String(parseFloat(v.toFixed(digits)));
  }
  function scale(lo, hi, log, a, b) {
    if (log) {
      var l0 = Math.log10(lo);
      var l1 = Math.log10(hi);
      return function (v) {
        return a + (Math.log10(v) - l0) / (l1 - l0) * (b - a);
      };
    }
    return function (v) {
      return a + (v - lo) / (hi - lo) * (b - a);
    };
  }

  // --- One chart as SVG: axes with ticks and names, the series, a legend.

  function drawChart(rs, chart, rows) {
    var log = logs(chart);
    var data = seriesOf(chart, rows, log);
    // Whether a log y axis has anything of ours to draw: values of zero
    // (an attack that recovered nothing) have no place on it.
    var positive = seriesOf(chart, rows, { x: log.x, y: true }).series.some(function (se) {
      return !se.paper && se.points.length > 0;
    });
    // Taller than the plot when the legend needs it.
    var height = Math.max(H, M.top + 20 + 18 * data.series.length);
    var svg = s('svg', {
      'class': 'chart', width: W + LEGEND, height: height, viewBox: '0 0 ' + (W + LEGEND) + ' ' + height,
      'data-chart': chart.file, 'data-ylog': log.y ? '1' : '0',
      'data-kind': data.cats ? 'bars' : 'lines',
      'data-positive': positive ? '1' : '0'
    });
    s('rect', { x: 0, y: 0, width: W + LEGEND, height: height, fill: '#fff' }, svg);
    var x0 = M.left;
    var x1 = W - M.right;
    var y0 = H - M.bottom;
    var y1 = M.top;
    var ys = [];
    var xs = [];
    data.series.forEach(function (se) {
      se.points.forEach(function (p) {
        xs.push(p[0]);
        ys.push(p[1]);
      });
    });
    var yr = extent(ys, log.y);
    var yt = log.y ? logTicks(yr[0], yr[1]) : linearTicks(yr[0], yr[1]);
    var Y = scale(yr[0], yr[1], log.y, y0, y1);
    var X;
    var xt;
    var xlabels;
    if (data.cats) {
      var n = data.cats.length;
      X = function (i) {
        return x0 + (i + 0.5) / n * (x1 - x0);
      };
      xt = data.cats.map(function (_, i) { return i; });
      xlabels = data.cats;
    } else {
      var xr = extent(xs, log.x);
      if (!log.x && xs.length && Math.min.apply(null, xs) > 0 && xr[0] === 0) {
        xr[0] = 0;
      }
      X = scale(xr[0], xr[1], log.x, x0, x1);
      xt = log.x ? logTicks(xr[0], xr[1]) : linearTicks(xr[0], xr[1]);
      xlabels = xt.map(fmt);
    }
    var grid = s('g', { 'class': 'grid' }, svg);
    yt.forEach(function (v) {
      s('line', { x1: x0, x2: x1, y1: Y(v), y2: Y(v), stroke: '#eee' }, grid);
    });
    // The axes.
    var ya = s('g', { 'class': 'y-axis' }, svg);
    s('line', { x1: x0, x2: x0, y1: y0, y2: y1, stroke: '#000' }, ya);
    yt.forEach(function (v) {
      s('line', { x1: x0 - 5, x2: x0, y1: Y(v), y2: Y(v), stroke: '#000' }, ya);
      s('text', { 'class': 'tick', x: x0 - 8, y: Y(v) + 4, 'text-anchor': 'end' }, ya, fmt(v));
    });
    s('text', {
      'class': 'axis-label', x: 16, y: (y0 + y1) / 2, 'text-anchor': 'middle',
      transform: 'rotate(-90 16 ' + (y0 + y1) / 2 + ')'
    }, ya, chart.y_axis.label + (log.y ? ' (log)' : ''));
    var xa = s('g', { 'class': 'x-axis' }, svg);
    s('line', { x1: x0, x2: x1, y1: y0, y2: y0, stroke: '#000' }, xa);
    xt.forEach(function (v, i) {
      s('line', { x1: X(v), x2: X(v), y1: y0, y2: y0 + 5, stroke: '#000' }, xa);
      s('text', { 'class': 'tick', x: X(v), y: y0 + 18, 'text-anchor': 'middle' }, xa, xlabels[i]);
    });
    s('text', { 'class': 'axis-label', x: (x0 + x1) / 2, y: H - 12, 'text-anchor': 'middle' }, xa,
      chart.x_axis.label + (log.x && !data.cats ? ' (log)' : ''));
    // The series.
    var groupWidth = data.cats ? (x1 - x0) / data.cats.length * 0.8 : 0;
    var barWidth = data.series.length ? groupWidth / data.series.length : 0;
    data.series.forEach(function (se, j) {
      var g = s('g', { 'class': 'series', 'data-label': se.label, 'data-paper': se.paper ? '1' : '0' }, svg);
      if (data.cats) {
        se.points.forEach(function (p) {
          var left = X(p[0]) - groupWidth / 2 + j * barWidth;
          var top = Y(p[1]);
          var base = log.y ? y0 : Y(Math.max(yr[0], 0));
          s('rect', {
            'class': 'point', x: left, y: Math.min(top, base), width: Math.max(barWidth - 2, 1),
            height: Math.max(Math.abs(base - top), 1),
            fill: se.paper ? 'none' : se.colour, stroke: se.colour, 'stroke-width': se.paper ? 2 : 0
          }, g).appendChild(s('title', {}, null, se.label + ': ' + fmt(p[1])));
        });
        return;
      }
      var d = se.points.map(function (p, i) {
        return (i ? 'L' : 'M') + X(p[0]).toFixed(1) + ' ' + Y(p[1]).toFixed(1);
      }).join(' ');
      s('path', {
        d: d, fill: 'none', stroke: se.colour, 'stroke-width': se.paper ? 1.5 : 2,
        'stroke-dasharray': se.paper ? '6 4' : 'none'
      }, g);
      se.points.forEach(function (p) {
        s('circle', {
          'class': 'point', cx: X(p[0]), cy: Y(p[1]), r: se.paper ? 4 : 3,
          fill: se.paper ? 'none' : se.colour, stroke: se.colour, 'stroke-width': 2
        }, g).appendChild(s('title', {}, null, se.label + ': (' + (data.cats ? data.cats[p[0]] : fmt(p[0])) + ', ' + fmt(p[1]) + ')'));
      });
    });
    // The legend, beside the plot.
    var lg = s('g', { 'class': 'legend' }, svg);
    data.series.forEach(function (se, i) {
      var y = M.top + 10 + 18 * i;
      s('line', {
        x1: W + 4, x2: W + 28, y1: y, y2: y, stroke: se.colour, 'stroke-width': 2,
        'stroke-dasharray': se.paper ? '4 3' : 'none'
      }, lg);
      s('circle', { cx: W + 16, cy: y, r: 3.5, fill: se.paper ? '#fff' : se.colour, stroke: se.colour, 'stroke-width': 2 }, lg);
      s('text', { x: W + 34, y: y + 4 }, lg, se.label);
    });
    if (!data.series.length) {
      s('text', { 'class': 'empty', x: (x0 + x1) / 2, y: (y0 + y1) / 2, 'text-anchor': 'middle' }, svg,
        'no rows pass the filters');
    }
    return svg;
  }

  // --- The table: parameters, the displayed figures, the paper's.

  function columns(rs) {
    var params = [];
    var figures = [];
    rs.rows.forEach(function (r) {
      Object.keys(r.params).forEach(function (k) {
        if (params.indexOf(k) < 0) {
          params.push(k);
        }
      });
      Object.keys(r.figures).forEach(function (k) {
        if (figures.indexOf(k) < 0) {
          figures.push(k);
        }
      });
    });
    if (rs.display && rs.display.length) {
      figures = rs.display.slice();
    }
    var paper = rs.rows.some(function (r) {
      return r.paper && r.paper.length;
    });
    return { params: params, figures: figures, paper: paper };
  }
  function cells(row, cols) {
    var out = cols.params.map(function (p) {
      return row.params[p] === undefined ? '' : row.params[p];
    });
    cols.figures.forEach(function (f) {
      out.push(typeof row.figures[f] === 'number' ? row.figures[f] : '');
    });
    if (cols.paper) {
      out.push((row.paper || []).map(function (p) {
        return p.name + '=' + fmt(p.value) + ' ' + p.unit + ' (' + p.source + ')';
      }).join('; '));
    }
    return out;
  }
  function compare(a, b) {
    var blankA = a === '';
    var blankB = b === '';
    if (blankA || blankB) {
      return blankA === blankB ? 0 : blankA ? 1 : -1;
    }
    if (typeof a === 'number' && typeof b === 'number') {
      return a - b;
    }
    return String(a).localeCompare(String(b), undefined, { numeric: true });
  }
  function drawTable(rs, rows, parent) {
    var cols = columns(rs);
    var header = cols.params.concat(cols.figures);
    if (cols.paper) {
      header.push('paper');
    }
    var body = rows.map(function (r) {
      return cells(r, cols);
    });
    if (state.sort) {
      var c = state.sort.col;
      var dir = state.sort.dir;
      body.sort(function (a, b) {
        var blank = (a[c] === '') - (b[c] === '');
        return blank !== 0 ? blank : dir * compare(a[c], b[c]);
      });
    }
    var table = h('table', { id: 'rows' }, parent);
    var tr = h('tr', {}, h('thead', {}, table));
    header.forEach(function (name, i) {
      var mark = state.sort && state.sort.col === i ? (state.sort.dir > 0 ? ' \u25b2' : ' \u25bc') : '';
      var th = h('th', { 'data-col': i, title: 'sort by ' + name }, tr, name + mark);
      th.addEventListener('click', function () {
        state.sort = state.sort && state.sort.col === i ? { col: i, dir: -state.sort.dir } : { col: i, dir: 1 };
        render();
      });
    });
    var tbody = h('tbody', {}, table);
    body.forEach(function (row) {
      var r = h('tr', {}, tbody);
      row.forEach(function (v, i) {
        var attrs = typeof v === 'number' ? { 'class': 'num', 'data-value': v } : {};
        if (cols.paper && i === row.length - 1) {
          attrs = { 'class': 'paper' };
        }
        h('td', attrs, r, typeof v === 'number' ? fmt(v) : String(v));
      });
    });
    return table;
  }

  // --- The controls and the page.

  function paramValues(rs) {
    var out = {};
    rs.rows.forEach(function (r) {
      Object.keys(r.params).forEach(function (k) {
        out[k] = out[k] || [];
        var v = String(r.params[k]);
        if (out[k].indexOf(v) < 0) {
          out[k].push(v);
        }
      });
    });
    return out;
  }
  function filterable(rs) {
    var values = paramValues(rs);
    return Object.keys(values).filter(function (k) {
      return values[k].length >= 2 && values[k].length <= 60;
    }).map(function (k) {
      return { name: k, values: values[k] };
    });
  }

  function render() {
    var rs = DATA[state.exp];
    var controls = document.getElementById('controls');
    var main = document.getElementById('main');
    controls.textContent = '';
    main.textContent = '';
    if (!rs) {
      h('p', {}, main, 'No results in this run.');
      return;
    }
    var pick = h('label', {}, controls, 'experiment ');
    var exp = h('select', { id: 'experiment' }, pick);
    DATA.forEach(function (r, i) {
      var o = h('option', { value: i }, exp, r.experiment + ' (' + r.scale + ')');
      if (i === state.exp) {
        o.selected = true;
      }
    });
    exp.addEventListener('change', function () {
      state.exp = Number(exp.value);
      state.filters = {};
      state.sort = null;
      render();
    });
    var paper = h('label', {}, controls);
    var box = h('input', { type: 'checkbox', id: 'paper' }, paper);
    box.checked = state.paper;
    paper.appendChild(document.createTextNode(' paper values'));
    box.addEventListener('change', function () {
      state.paper = box.checked;
      render();
    });
    var ax = h('label', {}, controls, 'axes ');
    var axes = h('select', { id: 'axes' }, ax);
    [['report', 'as in the report'], ['linear', 'linear'], ['log', 'log y']].forEach(function (o) {
      var e = h('option', { value: o[0] }, axes, o[1]);
      if (o[0] === state.axes) {
        e.selected = true;
      }
    });
    axes.addEventListener('change', function () {
      state.axes = axes.value;
      render();
    });
    var filters = h('div', { id: 'filters' }, controls);
    filterable(rs).forEach(function (f) {
      var l = h('label', {}, filters, f.name + ' ');
      var sel = h('select', { 'data-param': f.name }, l);
      h('option', { value: '' }, sel, 'all');
      f.values.forEach(function (v) {
        var o = h('option', { value: v }, sel, v);
        if (state.filters[f.name] === v) {
          o.selected = true;
        }
      });
      sel.addEventListener('change', function () {
        state.filters[f.name] = sel.value;
        render();
      });
    });

    h('h2', {}, main, rs.experiment + ': ' + rs.title);
    h('p', {}, main, 'Reproduces ' + rs.seed_paper + '. Scale ' + rs.scale + ', seed ' + rs.seed +
      '. Report page: ');
    main.lastChild.appendChild(h('a', { href: rs.experiment + '/index.html' }, null, rs.experiment + '/index.html'));
    if (rs.notes && rs.notes.length) {
      var ul = h('ul', { 'class': 'notes' }, main);
      rs.notes.forEach(function (n) {
        h('li', {}, ul, n);
      });
    }
    var rows = visibleRows(rs);
    h('p', { id: 'count' }, main, rows.length + ' of ' + rs.rows.length + ' rows pass the filters.');
    (rs.charts || []).forEach(function (c) {
      var fig = h('figure', { id: 'chart-' + c.file }, main);
      h('figcaption', {}, fig, c.title);
      fig.appendChild(drawChart(rs, c, rows));
    });
    drawTable(rs, rows, main);
  }

  // --- The self-check (#selfcheck).

  function checkCharts(problems, where) {
    var charts = document.querySelectorAll('svg.chart');
    charts.forEach(function (svg) {
      var name = where + '/' + svg.getAttribute('data-chart');
      var yt = svg.querySelectorAll('g.y-axis text.tick');
      var xt = svg.querySelectorAll('g.x-axis text.tick');
      var bars = svg.getAttribute('data-kind') === 'bars';
      if (yt.length < 2) {
        problems.push(name + ': ' + yt.length + ' y tick labels');
      }
      if (xt.length < (bars ? 1 : 2)) {
        problems.push(name + ': ' + xt.length + ' x tick labels');
      }
      var names = svg.querySelectorAll('text.axis-label');
      if (names.length !== 2 || !names[0].textContent.trim() || !names[1].textContent.trim()) {
        problems.push(name + ': an axis has no name');
      }
      var ours = svg.querySelectorAll('g.series[data-paper="0"] .point');
      // On a log axis a chart whose values are all zero draws no point
      // (the same chart on a linear axis is checked for its points).
      var empty = svg.getAttribute('data-ylog') === '1' && svg.getAttribute('data-positive') === '0';
      if (ours.length < 1 && !empty) {
        problems.push(name + ': no data series');
      }
    });
    return charts.length;
  }
  function paperExpected(rs, chart) {
    return rs.rows.some(function (r) {
      return selects(chart, r) && chart.y.some(function (y) {
        return paperValue(r, y) !== null && typeof r.figures[y] === 'number';
      });
    });
  }
  function selfcheck() {
    var problems = [];
    var charts = 0;
    var paperCharts = 0;
    DATA.forEach(function (rs, i) {
      state = { exp: i, filters: {}, paper: true, axes: 'report', sort: null };
      render();
      charts += checkCharts(problems, rs.experiment);
      (rs.charts || []).forEach(function (c) {
        var svg = document.querySelector('svg.chart[data-chart="' + c.file + '"]');
        var drawn = svg ? svg.querySelectorAll('g.series[data-paper="1"] .point').length : 0;
        if (paperExpected(rs, c)) {
          paperCharts += 1;
          if (drawn < 1) {
            problems.push(rs.experiment + '/' + c.file + ': the rows carry paper values but no paper series is drawn');
          }
        }
      });
      // The overlay toggle hides the paper's series.
      document.getElementById('paper').click();
      if (document.querySelectorAll('g.series[data-paper="1"]').length) {
        problems.push(rs.experiment + ': paper series still drawn with the overlay off');
      }
      state.paper = true;
      // A filter on the first parameter that has several values: fewer
      // rows, every shown row has the value, the charts change.
      var f = filterable(rs)[0];
      if (f) {
        render();
        var before = document.querySelectorAll('#rows tbody tr').length;
        var pointsBefore = document.querySelectorAll('svg.chart .point').length;
        var sel = document.querySelector('select[data-param="' + f.name + '"]');
        sel.value = f.values[0];
        sel.dispatchEvent(new Event('change'));
        var after = document.querySelectorAll('#rows tbody tr').length;
        var pointsAfter = document.querySelectorAll('svg.chart .point').length;
        var col = Array.prototype.map.call(document.querySelectorAll('#rows th'), function (t) {
          return t.textContent;
        }).indexOf(f.name);
        var wrong = Array.prototype.filter.call(document.querySelectorAll('#rows tbody tr'), function (tr) {
          return tr.children[col].textContent !== f.values[0] &&
            Number(tr.children[col].getAttribute('data-value')) !== Number(f.values[0]);
        }).length;
        if (!(after < before) || wrong) {
          problems.push(rs.experiment + ': filter ' + f.name + '=' + f.values[0] + ' left ' + after + ' of ' +
            before + ' rows, ' + wrong + ' with another value');
        }
        // The charts drew some of the rows filtered out: they change.
        var dropped = (rs.charts || []).some(function (c) {
          return rs.rows.some(function (r) {
            return selects(c, r) && r.params[f.name] !== undefined && !same(r.params[f.name], f.values[0]) &&
              c.y.some(function (y) {
                return typeof r.figures[y] === 'number';
              }) && (typeof r.params[c.x] === 'string' || number(r, c.x) !== null);
          });
        });
        if (dropped && pointsAfter === pointsBefore) {
          problems.push(rs.experiment + ': filter ' + f.name + ' did not change the charts');
        }
      }
      // Sorting: the first numeric column, ascending then descending.
      state.filters = {};
      render();
      var ths = document.querySelectorAll('#rows th');
      var numeric = -1;
      var firstRow = document.querySelector('#rows tbody tr');
      if (firstRow) {
        for (var k = 0; k < firstRow.children.length; k++) {
          if (firstRow.children[k].hasAttribute('data-value')) {
            numeric = k;
            break;
          }
        }
      }
      if (numeric >= 0) {
        var values = function () {
          return Array.prototype.map.call(document.querySelectorAll('#rows tbody tr'), function (tr) {
            var v = tr.children[numeric].getAttribute('data-value');
            return v === null ? null : Number(v);
          }).filter(function (v) {
            return v !== null;
          });
        };
        ths[numeric].click();
        var up = values();
        document.querySelectorAll('#rows th')[numeric].click();
        var down = values();
        var sorted = function (a, dir) {
          return a.every(function (v, j) {
            return j === 0 || dir * (v - a[j - 1]) >= 0;
          });
        };
        if (!sorted(up, 1) || !sorted(down, -1)) {
          problems.push(rs.experiment + ': clicking column ' + numeric + ' did not sort it');
        }
      }
      // The log toggle: every chart's y axis becomes logarithmic.
      state.sort = null;
      document.getElementById('axes').value = 'log';
      document.getElementById('axes').dispatchEvent(new Event('change'));
      if (document.querySelectorAll('svg.chart[data-ylog="0"]').length) {
        problems.push(rs.experiment + ': log y left a linear chart');
      }
      checkCharts(problems, rs.experiment + ' (log y)');
    });
    (window.sesameErrors || []).forEach(function (e) {
      problems.push('script error: ' + e);
    });
    state = { exp: 0, filters: {}, paper: true, axes: 'report', sort: null };
    render();
    var pre = h('pre', { id: 'selfcheck' }, document.body);
    pre.textContent = problems.length === 0
      ? 'selfcheck: ok: explore page, ' + DATA.length + ' experiments, ' + charts +
        ' charts with both axes, tick labels and data, ' + paperCharts +
        ' with the paper series; filters, overlay, log axis and sorting respond'
      : 'selfcheck: FAIL: ' + problems.join('; ');
  }

  var m = /exp=([\w-]+)/.exec(location.hash);
  if (m) {
    DATA.forEach(function (r, i) {
      if (r.experiment === m[1]) {
        state.exp = i;
      }
    });
  }
  render();
  if (location.hash === '#selfcheck') {
    try {
      selfcheck();
    } catch (e) {
      var pre = h('pre', { id: 'selfcheck' }, document.body);
      pre.textContent = 'selfcheck: FAIL: ' + e;
    }
  }
})();
