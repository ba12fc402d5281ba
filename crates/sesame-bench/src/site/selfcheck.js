// The report pages' self-check, run when the page is opened with the
// fragment #selfcheck (scripts/check-site.sh does, in headless Chromium).
// It reads the charts as drawn (plotters' SVG) and writes its verdict into
// the page, in a pre element with the id selfcheck: "selfcheck: ok: ..." or
// "selfcheck: FAIL: ...".
(function () {
  'use strict';
  if (location.hash !== '#selfcheck') {
    return;
  }

  function attr(e, name) {
    return e.getAttribute(name) || '';
  }
  function num(e, name) {
    return parseFloat(attr(e, name));
  }
  function text(e) {
    return (e.textContent || '').trim();
  }
  function isBlack(c) {
    return c.toUpperCase() === '#000000';
  }

  // The plot area's axes: plotters draws each as a black polyline of two
  // points, a long vertical one (y) and a long horizontal one (x).
  function axes(svg) {
    var out = { x: null, y: null };
    svg.querySelectorAll('polyline').forEach(function (p) {
      if (!isBlack(attr(p, 'stroke'))) {
        return;
      }
      var pts = attr(p, 'points').trim().split(/\s+/).map(function (s) {
        return s.split(',').map(parseFloat);
      });
      if (pts.length !== 2) {
        return;
      }
      var dx = Math.abs(pts[0][0] - pts[1][0]);
      var dy = Math.abs(pts[0][1] - pts[1][1]);
      if (dx === 0 && dy > 100 && out.y === null) {
        out.y = { x: pts[0][0], top: Math.min(pts[0][1], pts[1][1]), bottom: Math.max(pts[0][1], pts[1][1]) };
      } else if (dy === 0 && dx > 100 && out.x === null) {
        out.x = { y: pts[0][1], left: Math.min(pts[0][0], pts[1][0]), right: Math.max(pts[0][0], pts[1][0]) };
      }
    });
    return out;
  }

  // An axis drawn as declared (the panel's data-x-scale, data-y-scale):
  // the tick labels stand at positions linear in their values on a linear
  // axis, in their logarithms on a log one (within 3 px, against the line
  // through the lowest and the highest tick; three ticks make it testable).
  function checkScale(ticks, pos, declared, axis, name, problems) {
    if (declared !== 'log' && declared !== 'linear') {
      return;
    }
    var pts = ticks.map(function (t) {
      return [Number(text(t)), num(t, pos), text(t)];
    }).filter(function (p) {
      return isFinite(p[0]) && isFinite(p[1]);
    });
    if (declared === 'log') {
      var bad = pts.filter(function (p) {
        return p[0] <= 0;
      });
      if (bad.length > 0) {
        problems.push(name + ': the ' + axis + ' axis is declared log but has a tick at ' + bad[0][2]);
        return;
      }
    }
    if (pts.length < 3) {
      return;
    }
    var f = declared === 'log' ? Math.log : function (v) {
      return v;
    };
    pts.sort(function (a, b) {
      return a[0] - b[0];
    });
    var lo = pts[0];
    var hi = pts[pts.length - 1];
    if (f(hi[0]) === f(lo[0])) {
      return;
    }
    var k = (hi[1] - lo[1]) / (f(hi[0]) - f(lo[0]));
    // The first tick out of place says it for the axis.
    pts.some(function (p) {
      var want = lo[1] + k * (f(p[0]) - f(lo[0]));
      if (Math.abs(want - p[1]) > 3) {
        problems.push(name + ': the ' + axis + ' axis is declared ' + declared + ' but its tick ' +
          p[2] + ' stands at ' + p[1].toFixed(1) + ', not ' + want.toFixed(1));
        return true;
      }
      return false;
    });
  }

  // One panel of a chart: its axes, their tick labels and names, a data
  // series; returns what it draws of ours and of the paper's.
  function checkPanel(svg, name, bars, problems) {
    var none = { ours: 0, theirs: 0, legendPaper: false };
    var ax = axes(svg);
    if (!ax.x || !ax.y) {
      problems.push(name + ': ' + (!ax.x ? 'no x axis' : 'no y axis'));
      return none;
    }
    var texts = Array.prototype.slice.call(svg.querySelectorAll('text'));
    var yTicks = texts.filter(function (t) {
      return attr(t, 'text-anchor') === 'end' && num(t, 'x') < ax.y.x && text(t) !== '';
    });
    var xTicks = texts.filter(function (t) {
      var y = num(t, 'y');
      return !attr(t, 'transform') && y > ax.x.y && y <= ax.x.y + 30 &&
        num(t, 'x') >= ax.x.left - 5 && num(t, 'x') <= ax.x.right + 5 && text(t) !== '';
    });
    var yName = texts.filter(function (t) {
      return attr(t, 'transform').indexOf('rotate') === 0 && text(t) !== '';
    });
    var xName = texts.filter(function (t) {
      return !attr(t, 'transform') && num(t, 'y') > ax.x.y + 30 && num(t, 'x') < ax.x.right && text(t) !== '';
    });
    if (yTicks.length < 2) {
      problems.push(name + ': ' + yTicks.length + ' y tick labels');
    }
    if (xTicks.length < (bars ? 1 : 2)) {
      problems.push(name + ': ' + xTicks.length + ' x tick labels');
    }
    if (yName.length < 1 || xName.length < 1) {
      problems.push(name + ': an axis has no name');
    }
    checkScale(yTicks, 'y', attr(svg, 'data-y-scale'), 'y', name, problems);
    checkScale(xTicks, 'x', attr(svg, 'data-x-scale'), 'x', name, problems);
    // Inside the plot area: a line or filled marker of a colour (ours),
    // a filled bar; hollow markers or outlined bars are the paper's.
    var inPlot = function (e, xName, yName) {
      var x = num(e, xName);
      var y = num(e, yName);
      return x >= ax.x.left - 1 && x <= ax.x.right + 1 && y >= ax.y.top - 1 && y <= ax.y.bottom + 1;
    };
    var ours = 0;
    var theirs = 0;
    svg.querySelectorAll('circle').forEach(function (c) {
      if (!inPlot(c, 'cx', 'cy')) {
        return;
      }
      if (attr(c, 'fill') === 'none') {
        theirs += 1;
      } else {
        ours += 1;
      }
    });
    svg.querySelectorAll('rect').forEach(function (r) {
      if (!inPlot(r, 'x', 'y') || num(r, 'width') <= 0) {
        return;
      }
      var fill = attr(r, 'fill');
      if (fill === 'none') {
        theirs += 1;
      } else if (fill.toUpperCase() !== '#FFFFFF' && (num(r, 'height') > 0)) {
        ours += 1;
      }
    });
    var legendPaper = texts.some(function (t) {
      return num(t, 'x') > ax.x.right && /\(paper\)$/.test(text(t));
    });
    if (ours < 1) {
      problems.push(name + ': no data series drawn');
    }
    // One colour per series of ours in a panel, each drawn.
    var colours = attr(svg, 'data-colours').split(' ').filter(function (c) {
      return c !== '';
    });
    var seen = {};
    colours.forEach(function (c) {
      var key = c.toUpperCase();
      if (seen[key]) {
        problems.push(name + ': colour ' + c + ' is used by two series');
      }
      seen[key] = true;
      var drawn = Array.prototype.some.call(svg.querySelectorAll('[stroke],[fill]'), function (e) {
        return attr(e, 'stroke').toUpperCase() === key || attr(e, 'fill').toUpperCase() === key;
      });
      if (!drawn) {
        problems.push(name + ': colour ' + c + ' of a series is not drawn');
      }
    });
    // A categorical x axis names its categories under the bars.
    if (bars) {
      var cats = attr(svg, 'data-categories').split('|').filter(function (c) {
        return c !== '';
      });
      if (cats.length < 1) {
        problems.push(name + ': a bar chart without categories');
      }
      var labels = xTicks.map(text);
      cats.forEach(function (c) {
        if (labels.indexOf(c) < 0) {
          problems.push(name + ': category ' + c + ' has no label on the x axis');
        }
      });
    }
    return { ours: ours, theirs: theirs, legendPaper: legendPaper };
  }

  // One chart of a report page: each of its panels (small multiples are
  // nested SVG documents of class panel) with its axes, tick labels and
  // names, a data series, one colour per series and, on bars, the
  // categories' names; the paper's series where the figure says the rows
  // carry the paper's values (data-paper="1").
  function checkChart(figure, problems) {
    var name = figure.id || '(unnamed chart)';
    var panels = figure.querySelectorAll('svg.panel');
    if (panels.length < 1) {
      problems.push(name + ': no SVG panel');
      return { paper: false };
    }
    var bars = figure.getAttribute('data-kind') === 'bars';
    var theirs = 0;
    var legendPaper = false;
    panels.forEach(function (svg, k) {
      var r = checkPanel(svg, panels.length > 1 ? name + ' panel ' + (k + 1) : name, bars, problems);
      theirs += r.theirs;
      legendPaper = legendPaper || r.legendPaper;
    });
    var paper = figure.getAttribute('data-paper') === '1';
    if (paper && (theirs < 1 || !legendPaper)) {
      problems.push(name + ': the rows carry paper values but no paper series is drawn');
    }
    return { paper: paper };
  }

  function run() {
    var problems = [];
    var figures = document.querySelectorAll('figure');
    var withPaper = 0;
    figures.forEach(function (f) {
      if (checkChart(f, problems).paper) {
        withPaper += 1;
      }
    });
    var page = document.body.getAttribute('data-page') || '';
    if (page === 'experiment' && document.querySelectorAll('table tbody tr').length < 1) {
      problems.push('the results table has no rows');
    }
    if (page === 'index') {
      var links = document.querySelectorAll('a[href$="/index.html"]');
      if (links.length < 1) {
        problems.push('no experiment is linked');
      }
      if (!document.querySelector('a[href="explore.html"]')) {
        problems.push('explore.html is not linked');
      }
    }
    var errors = window.sesameErrors || [];
    errors.forEach(function (e) {
      problems.push('script error: ' + e);
    });
    var verdict = problems.length === 0
      ? 'selfcheck: ok: ' + page + ' page, ' + figures.length + ' charts with both axes, tick labels and data, ' +
        withPaper + ' with the paper series'
      : 'selfcheck: FAIL: ' + problems.join('; ');
    var pre = document.createElement('pre');
    pre.id = 'selfcheck';
    pre.textContent = verdict;
    document.body.appendChild(pre);
  }

  if (document.readyState === 'complete') {
    run();
  } else {
    window.addEventListener('load', run);
  }
})();
