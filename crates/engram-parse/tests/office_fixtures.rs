//! Office and OpenDocument files made by a real office suite: LibreOffice (installed by the
//! project's set-up) converts a generated HTML document to ODT and DOCX, the markitdown
//! PowerPoint to ODP and the markitdown workbook to ODS; engram reads them all with structure.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use engram_parse::{detect, extract, BlockKind, Document, Format, Limits};

const REPORT: &str = "<html><body>
<h1>Quarterly Report</h1>
<p>Revenue grew in every region during the quarter.</p>
<h2>Regional results</h2>
<ul><li>North exceeded its target</li><li>South held steady</li></ul>
<table border=1><tr><th>Region</th><th>Revenue</th></tr>
<tr><td>North</td><td>1200</td></tr><tr><td>South</td><td>800</td></tr></table>
<h2>Outlook</h2><p>Hiring continues &amp; costs stay flat.</p>
</body></html>";

/// A specification with numbered headings (outline numbering) and numbered lists (decimal with
/// letters below, and roman numerals), as a flat ODT that LibreOffice turns into a DOCX whose
/// numbers live in `numbering.xml`.
const NUMBERED: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
 <office:styles>
  <style:style style:name="Heading_20_1" style:display-name="Heading 1" style:family="paragraph" style:default-outline-level="1"/>
  <style:style style:name="Heading_20_2" style:display-name="Heading 2" style:family="paragraph" style:default-outline-level="2"/>
  <text:outline-style style:name="Outline">
   <text:outline-level-style text:level="1" style:num-format="1"/>
   <text:outline-level-style text:level="2" style:num-format="1" text:display-levels="2"/>
  </text:outline-style>
 </office:styles>
 <office:automatic-styles>
  <text:list-style style:name="L1">
   <text:list-level-style-number text:level="1" style:num-format="1" style:num-suffix="."/>
   <text:list-level-style-number text:level="2" style:num-format="a" style:num-suffix=")"/>
  </text:list-style>
  <text:list-style style:name="L2">
   <text:list-level-style-number text:level="1" style:num-format="I" style:num-suffix="."/>
  </text:list-style>
 </office:automatic-styles>
 <office:body>
  <office:text>
   <text:h text:style-name="Heading_20_1" text:outline-level="1">Scope</text:h>
   <text:p>This standard covers lighthouse lamps.</text:p>
   <text:h text:style-name="Heading_20_2" text:outline-level="2">Lamps</text:h>
   <text:p>Lamps burn for ten hours.</text:p>
   <text:h text:style-name="Heading_20_2" text:outline-level="2">Lenses</text:h>
   <text:p>Lenses are cleaned weekly.</text:p>
   <text:list text:style-name="L1">
    <text:list-item><text:p>Remove the lens</text:p>
     <text:list><text:list-item><text:p>Loosen the clamps</text:p></text:list-item><text:list-item><text:p>Lift it out</text:p></text:list-item></text:list>
    </text:list-item>
    <text:list-item><text:p>Wash the lens</text:p></text:list-item>
   </text:list>
   <text:h text:style-name="Heading_20_1" text:outline-level="1">Safety</text:h>
   <text:list text:style-name="L2">
    <text:list-item><text:p>Wear gloves</text:p></text:list-item>
    <text:list-item><text:p>Wear goggles</text:p></text:list-item>
   </text:list>
  </office:text>
 </office:body>
</office:document>"#;

/// A schedule whose cells are dates and date-times in date formats, as a flat ODS that
/// LibreOffice saves as XLSX and XLS (which store dates as serial numbers).
const SCHEDULE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
 <office:automatic-styles>
  <number:date-style style:name="N1"><number:year number:style="long"/><number:text>-</number:text><number:month number:style="long"/><number:text>-</number:text><number:day number:style="long"/></number:date-style>
  <number:date-style style:name="N2"><number:year number:style="long"/><number:text>-</number:text><number:month number:style="long"/><number:text>-</number:text><number:day number:style="long"/><number:text> </number:text><number:hours number:style="long"/><number:text>:</number:text><number:minutes number:style="long"/></number:date-style>
  <style:style style:name="ce1" style:family="table-cell" style:data-style-name="N1"/>
  <style:style style:name="ce2" style:family="table-cell" style:data-style-name="N2"/>
 </office:automatic-styles>
 <office:body>
  <office:spreadsheet>
   <table:table table:name="Schedule">
    <table:table-row><table:table-cell office:value-type="string"><text:p>Event</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>When</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Count</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Audit</text:p></table:table-cell><table:table-cell table:style-name="ce1" office:value-type="date" office:date-value="2024-01-01"><text:p>2024-01-01</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="3"><text:p>3</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Launch</text:p></table:table-cell><table:table-cell table:style-name="ce2" office:value-type="date" office:date-value="2024-03-15T09:30:00"><text:p>2024-03-15 09:30</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="12"><text:p>12</text:p></table:table-cell></table:table-row>
   </table:table>
  </office:spreadsheet>
 </office:body>
</office:document>"#;

/// A bar chart as an ODF chart object with its own data table.
const CHART_OBJECT: &str = r#"<draw:object>
    <office:document office:mimetype="application/vnd.oasis.opendocument.chart" office:version="1.3">
     <office:body><office:chart>
      <chart:chart chart:class="chart:bar" svg:width="8cm" svg:height="7cm">
       <chart:title><text:p>Revenue by region</text:p></chart:title>
       <chart:plot-area table:cell-range-address="local-table.$A$1:.$B$3" chart:data-source-has-labels="both">
        <chart:axis chart:dimension="x" chart:name="primary-x"><chart:categories table:cell-range-address="local-table.$A$2:.$A$3"/></chart:axis>
        <chart:axis chart:dimension="y" chart:name="primary-y"/>
        <chart:series chart:values-cell-range-address="local-table.$B$2:.$B$3" chart:label-cell-address="local-table.$B$1" chart:class="chart:bar"/>
       </chart:plot-area>
       <table:table table:name="local-table">
        <table:table-header-columns><table:table-column/></table:table-header-columns>
        <table:table-columns><table:table-column/></table:table-columns>
        <table:table-header-rows><table:table-row><table:table-cell><text:p/></table:table-cell><table:table-cell office:value-type="string"><text:p>Sales 2024</text:p></table:table-cell></table:table-row></table:table-header-rows>
        <table:table-rows>
         <table:table-row><table:table-cell office:value-type="string"><text:p>North</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="1200"><text:p>1200</text:p></table:table-cell></table:table-row>
         <table:table-row><table:table-cell office:value-type="string"><text:p>South</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="800"><text:p>800</text:p></table:table-cell></table:table-row>
        </table:table-rows>
       </table:table>
      </chart:chart>
     </office:chart></office:body>
    </office:document>
   </draw:object>"#;

/// A report holding the chart, as a flat ODT that LibreOffice saves as DOCX with a DrawingML
/// chart part.
const CHARTED: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:chart="urn:oasis:names:tc:opendocument:xmlns:chart:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
 <office:body>
  <office:text>
   <text:p>Sales rose in the north.</text:p>
   <text:p><draw:frame draw:name="Chart1" svg:width="8cm" svg:height="7cm" text:anchor-type="as-char">{chart}</draw:frame></text:p>
   <text:p>End of report.</text:p>
  </office:text>
 </office:body>
</office:document>"#;

/// The same chart on a sheet, as a flat ODS that LibreOffice saves as XLSX.
const CHARTED_BOOK: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:chart="urn:oasis:names:tc:opendocument:xmlns:chart:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
 <office:body>
  <office:spreadsheet>
   <table:table table:name="Sales">
    <table:shapes><draw:frame draw:name="Chart1" svg:width="8cm" svg:height="7cm" >{chart}</draw:frame></table:shapes>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Region</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Sales 2024</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>North</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="1200"><text:p>1200</text:p></table:table-cell></table:table-row>
   </table:table>
  </office:spreadsheet>
 </office:body>
</office:document>"#;

/// A budget with a note on a cell, as a flat ODS that LibreOffice saves as XLSX (a legacy
/// comments part with its author).
const NOTED_BOOK: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
 <office:body>
  <office:spreadsheet>
   <table:table table:name="Budget">
    <table:table-row><table:table-cell office:value-type="string"><text:p>Item</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Cost</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Lamps</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="420"><office:annotation><dc:creator>Ana Silva</dc:creator><text:p>Quote from the March supplier visit</text:p></office:annotation><text:p>420</text:p></table:table-cell></table:table-row>
   </table:table>
  </office:spreadsheet>
 </office:body>
</office:document>"#;

/// A slide with a comment, as a flat ODP that LibreOffice saves as PPTX.
const COMMENTED_DECK: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" xmlns:officeooo="http://openoffice.org/2009/office" xmlns:dc="http://purl.org/dc/elements/1.1/" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.presentation">
 <office:body>
  <office:presentation>
   <draw:page draw:name="page1">
    <draw:frame svg:width="20cm" svg:height="3cm" svg:x="2cm" svg:y="2cm"><draw:text-box><text:p>Lighthouse budget</text:p></draw:text-box></draw:frame>
    <officeooo:annotation svg:x="1cm" svg:y="1cm"><dc:creator>Cy Okafor</dc:creator><text:p>Add the lens replacement cost</text:p></officeooo:annotation>
   </draw:page>
  </office:presentation>
 </office:body>
</office:document>"#;

/// Arabic and Hebrew paragraphs set right to left, an English line quoting an Arabic word,
/// Arabic words drawn with the lam-alef ligature and a line with vowel marks, as a flat ODT
/// that LibreOffice prints to PDF.
const RIGHT_TO_LEFT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
 <office:automatic-styles><style:style style:name="P1" style:family="paragraph"><style:paragraph-properties style:writing-mode="rl-tb"/></style:style></office:automatic-styles>
 <office:body><office:text>
  <text:p text:style-name="P1">مرحبا بكم في المكتبة</text:p>
  <text:p text:style-name="P1">שלום עולם, זהו מסמך בדיקה</text:p>
  <text:p>Mixed: the word كتاب means book.</text:p>
  <text:p text:style-name="P1">السلام عليكم، لا أعلم كلام العلاقة في الإسلام</text:p>
  <text:p text:style-name="P1">كَتَبَ الوَلَدُ الدَّرْسَ</text:p>
 </office:text></office:body>
</office:document>"#;

/// A paragraph citing a footnote and one holding a captioned frame, each going on after it, as
/// a flat ODT that LibreOffice saves as ODT (python-docx-style corpus files lost the words after
/// the note or the frame).
const NOTES_AND_FRAMES: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
 <office:body><office:text>
  <text:p>The keeper logs the lamp<text:note text:id="ftn1" text:note-class="footnote"><text:note-citation>1</text:note-citation><text:note-body><text:p>Logged hourly since 1902.</text:p></text:note-body></text:note> before every watch begins.</text:p>
  <text:p><draw:frame draw:name="Frame1" text:anchor-type="paragraph" svg:width="4cm"><draw:text-box fo:min-height="1cm"><text:p>Figure 1: the lantern room</text:p></draw:text-box></draw:frame>Paraffin burned until the station was electrified.</text:p>
 </office:text></office:body>
</office:document>"#;

/// Korean paragraphs (set in a Nanum font, which make setup-test installs), as a flat ODT that
/// LibreOffice prints to PDF.
const KOREAN: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
 <office:body><office:text>
  <text:p>대한민국의 수도는 서울특별시이며, 인구는 약 천만 명이다.</text:p>
  <text:p>회의는 다음 주 화요일 오후 세 시에 본사 회의실에서 열립니다.</text:p>
 </office:text></office:body>
</office:document>"#;

/// Chinese and Japanese paragraphs (set in WenQuanYi Micro Hei, which make setup-test
/// installs), as a flat ODT that LibreOffice prints to PDF.
const CHINESE_JAPANESE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
 <office:body><office:text>
  <text:p>北京是中华人民共和国的首都，人口约两千万。</text:p>
  <text:p>会议将于下周二下午三点在总部会议室举行。</text:p>
  <text:p>東京は日本の首都であり、人口は約千四百万人です。</text:p>
  <text:p>会議は来週の火曜日午後三時に本社の会議室で開かれます。</text:p>
 </office:text></office:body>
</office:document>"#;

/// A paper's results table between two paragraphs, as a flat ODT that LibreOffice prints to PDF.
const RESULTS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
 <office:body><office:text>
  <text:p>Table 2 compares the three retrievers on the held-out questions.</text:p>
  <table:table table:name="Results">
   <table:table-column table:number-columns-repeated="4"/>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Model</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Precision</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Recall</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>F1</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>BM25</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.612</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.704</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.655</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Dense retriever</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.668</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.741</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.703</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Hybrid (convex)</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.713</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.786</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>0.748</text:p></table:table-cell></table:table-row>
  </table:table>
  <text:p>The hybrid retriever leads on every measure.</text:p>
 </office:text></office:body>
</office:document>"#;

/// Figures in percent, currency and grouped number formats, as a flat ODS that LibreOffice
/// saves as XLSX.
const FIGURES: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.spreadsheet">
 <office:automatic-styles>
  <number:percentage-style style:name="N1"><number:number number:decimal-places="1" number:min-integer-digits="1"/><number:text>%</number:text></number:percentage-style>
  <number:currency-style style:name="N2"><number:currency-symbol>$</number:currency-symbol><number:number number:decimal-places="2" number:min-integer-digits="1" number:grouping="true"/></number:currency-style>
  <number:number-style style:name="N3"><number:number number:decimal-places="0" number:min-integer-digits="1" number:grouping="true"/></number:number-style>
  <style:style style:name="ce1" style:family="table-cell" style:data-style-name="N1"/>
  <style:style style:name="ce2" style:family="table-cell" style:data-style-name="N2"/>
  <style:style style:name="ce3" style:family="table-cell" style:data-style-name="N3"/>
 </office:automatic-styles>
 <office:body>
  <office:spreadsheet>
   <table:table table:name="Figures">
    <table:table-row><table:table-cell office:value-type="string"><text:p>Measure</text:p></table:table-cell><table:table-cell office:value-type="string"><text:p>Value</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Growth</text:p></table:table-cell><table:table-cell table:style-name="ce1" office:value-type="percentage" office:value="0.125"><text:p>12.5%</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Price</text:p></table:table-cell><table:table-cell table:style-name="ce2" office:value-type="currency" office:currency="USD" office:value="1234.5"><text:p>$1,234.50</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Visitors</text:p></table:table-cell><table:table-cell table:style-name="ce3" office:value-type="float" office:value="1234567"><text:p>1,234,567</text:p></table:table-cell></table:table-row>
    <table:table-row><table:table-cell office:value-type="string"><text:p>Plain</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="0.5"><text:p>0.5</text:p></table:table-cell></table:table-row>
   </table:table>
  </office:spreadsheet>
 </office:body>
</office:document>"#;

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/markitdown")
        .join(name)
}

/// Converts `input` to `format` (an extension, or `extension:filter`) with LibreOffice into
/// `dir`; `None` when soffice is missing.
fn convert(dir: &Path, input: &Path, format: &str) -> Option<Vec<u8>> {
    let profile = format!("-env:UserInstallation=file://{}/profile", dir.display());
    let status = Command::new("soffice")
        .args([&profile, "--headless", "--convert-to", format, "--outdir"])
        .arg(dir)
        .arg(input)
        .output();
    match status {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("soffice failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => {
            eprintln!("soffice is not installed (make setup installs it): skipped");
            return None;
        }
    }
    let stem = input.file_stem().unwrap().to_string_lossy().into_owned();
    let extension = format.split(':').next().unwrap();
    Some(std::fs::read(dir.join(format!("{stem}.{extension}"))).unwrap())
}

/// A flat ODT printed to PDF by LibreOffice, read as a PDF; `None` when soffice is missing.
fn printed(name: &str, fodt: &str) -> Option<Document> {
    let pdf = printed_pdf(name, fodt)?;
    Some(read(&pdf, &format!("{name}.pdf"), Format::Pdf))
}

/// A flat ODT printed to PDF by LibreOffice; `None` when soffice is missing.
fn printed_pdf(name: &str, fodt: &str) -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join(format!("{name}.fodt"));
    std::fs::write(&source, fodt).unwrap();
    convert(dir.path(), &source, "pdf")
}

fn read(bytes: &[u8], name: &str, expected: Format) -> Document {
    let format = detect(bytes, name, None).unwrap();
    assert_eq!(format, expected, "{name}");
    extract(bytes, format, &Limits::default()).unwrap()
}

/// The text of each block of a file read as `expected`.
fn block_texts(bytes: &[u8], name: &str, expected: Format) -> Vec<String> {
    read(bytes, name, expected)
        .blocks
        .into_iter()
        .map(|b| b.text)
        .collect()
}

fn check_report(doc: &Document, name: &str) {
    let text = doc.text();
    for s in [
        "Quarterly Report",
        "Revenue grew in every region",
        "North exceeded its target",
        "Hiring continues & costs stay flat",
    ] {
        assert!(text.contains(s), "{name}: {s} missing from\n{text}");
    }
    let table = doc
        .blocks
        .iter()
        .find(|b| b.kind == BlockKind::Table)
        .unwrap_or_else(|| panic!("{name}: no table in {text}"));
    assert!(
        table.text.contains("| Region | Revenue |") && table.text.contains("| North | 1200 |"),
        "{name}: {}",
        table.text
    );
    let outlook = doc
        .blocks
        .iter()
        .find(|b| b.text.contains("Hiring continues"))
        .unwrap();
    assert_eq!(
        outlook.layout.headings,
        ["Quarterly Report", "Outlook"],
        "{name}"
    );
    assert!(
        doc.blocks.iter().any(|b| b.kind == BlockKind::ListItem),
        "{name}: no list items"
    );
}

#[test]
fn libreoffice_documents_keep_their_structure() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    std::fs::write(&html, REPORT).unwrap();
    let Some(odt) = convert(dir.path(), &html, "odt") else {
        return;
    };
    check_report(&read(&odt, "report.odt", Format::Odt), "odt");
    let docx = convert(dir.path(), &html, "docx:MS Word 2007 XML").unwrap();
    check_report(&read(&docx, "report.docx", Format::Docx), "docx");

    let doc = convert(dir.path(), &html, "doc:MS Word 97").unwrap();
    let old = read(&doc, "report.doc", Format::Doc);
    let text = old.text();
    for s in [
        "Quarterly Report",
        "Revenue grew in every region",
        "North exceeded its target",
        "Hiring continues & costs stay flat",
        "1200",
    ] {
        assert!(text.contains(s), "doc: {s} missing from\n{text}");
    }
    let ppt = convert(dir.path(), &sample("test.pptx"), "ppt").unwrap();
    let deck = read(&ppt, "test.ppt", Format::Ppt);
    let text = deck.text();
    assert!(
        text.contains("AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation"),
        "{text}"
    );
    let slides: Vec<u32> = deck.blocks.iter().filter_map(|b| b.layout.slide).collect();
    assert_eq!(slides.first(), Some(&1), "{text}");
    assert!(slides.iter().max().unwrap() >= &5, "{slides:?}");

    let odp = convert(dir.path(), &sample("test.pptx"), "odp").unwrap();
    let deck = read(&odp, "test.odp", Format::Odp);
    let text = deck.text();
    assert!(
        text.contains("AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation"),
        "{text}"
    );
    let slides: Vec<u32> = deck.blocks.iter().filter_map(|b| b.layout.slide).collect();
    assert_eq!(slides.first(), Some(&1));
    assert!(slides.iter().max().unwrap() >= &5, "{slides:?}");

    let ods = convert(dir.path(), &sample("test.xlsx"), "ods").unwrap();
    let book = read(&ods, "test.ods", Format::Ods);
    assert!(book.text().contains("6ff4173b-42a5-4784-9b19-f49caff4d93d"));
    let table = book
        .blocks
        .iter()
        .find(|b| b.kind == BlockKind::Table)
        .unwrap();
    assert!(table.layout.sheet.is_some() && table.layout.row_range.is_some());
}

#[test]
fn notes_and_frames_keep_the_paragraph_around_them() {
    let dir = tempfile::tempdir().unwrap();
    let fodt = dir.path().join("keeper.fodt");
    std::fs::write(&fodt, NOTES_AND_FRAMES).unwrap();
    let Some(odt) = convert(dir.path(), &fodt, "odt") else {
        return;
    };
    let texts = block_texts(&odt, "keeper.odt", Format::Odt);
    assert_eq!(
        texts,
        [
            "The keeper logs the lamp[1] before every watch begins.",
            "Logged hourly since 1902.",
            "Paraffin burned until the station was electrified.",
            "Figure 1: the lantern room",
        ]
    );
}

#[test]
fn word_numbering_is_read_from_the_numbering_definitions() {
    let dir = tempfile::tempdir().unwrap();
    let fodt = dir.path().join("spec.fodt");
    std::fs::write(&fodt, NUMBERED).unwrap();
    let Some(docx) = convert(dir.path(), &fodt, "docx:MS Word 2007 XML") else {
        return;
    };
    let doc = read(&docx, "spec.docx", Format::Docx);
    let text = doc.text();
    for expected in [
        "# 1 Scope",
        "## 1.1 Lamps",
        "## 1.2 Lenses",
        "1. Remove the lens",
        "a) Loosen the clamps",
        "b) Lift it out",
        "2. Wash the lens",
        "# 2 Safety",
        "I. Wear gloves",
        "II. Wear goggles",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }
    let lenses = doc
        .blocks
        .iter()
        .find(|b| b.text.contains("cleaned weekly"))
        .unwrap();
    assert_eq!(lenses.layout.headings, ["1 Scope", "1.2 Lenses"]);
}

#[test]
fn spreadsheet_dates_read_as_dates() {
    let dir = tempfile::tempdir().unwrap();
    let fods = dir.path().join("schedule.fods");
    std::fs::write(&fods, SCHEDULE).unwrap();
    let Some(xlsx) = convert(dir.path(), &fods, "xlsx:Calc MS Excel 2007 XML") else {
        return;
    };
    let xls = convert(dir.path(), &fods, "xls:MS Excel 97").unwrap();
    for (bytes, name, format) in [
        (xlsx, "schedule.xlsx", Format::Xlsx),
        (xls, "schedule.xls", Format::Xls),
    ] {
        let text = read(&bytes, name, format).text();
        for expected in [
            "| Audit | 2024-01-01 | 3 |",
            "| Launch | 2024-03-15 09:30 | 12 |",
        ] {
            assert!(
                text.contains(expected),
                "{name}: {expected:?} missing from\n{text}"
            );
        }
        assert!(!text.contains("45292"), "{name}: a serial number\n{text}");
    }
}

/// `docx` with its `word/document.xml` cut short (a damaged file the Word reader rejects).
fn damaged(docx: &[u8]) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut input = zip::ZipArchive::new(std::io::Cursor::new(docx)).unwrap();
    let mut output = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for i in 0..input.len() {
        let mut entry = input.by_index(i).unwrap();
        let name = entry.name().to_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        if name == "word/document.xml" {
            let cut = bytes.len() - 40;
            bytes.truncate(cut);
            bytes.extend_from_slice(b"<w:p></w:tbl>");
        }
        output
            .start_file(name, zip::write::SimpleFileOptions::default())
            .unwrap();
        output.write_all(&bytes).unwrap();
    }
    output.finish().unwrap().into_inner()
}

#[test]
fn a_file_its_reader_fails_on_is_read_plainly_instead_of_lost() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    std::fs::write(&html, REPORT).unwrap();
    let Some(docx) = convert(dir.path(), &html, "docx:MS Word 2007 XML") else {
        return;
    };
    let doc = read(&damaged(&docx), "report.docx", Format::Docx);
    let text = doc.text();
    for s in [
        "Quarterly Report",
        "Revenue grew in every region",
        "North exceeded its target",
        "1200",
    ] {
        assert!(text.contains(s), "{s} missing from\n{text}");
    }
    assert!(
        doc.blocks
            .iter()
            .all(|b| b.layout.reader.as_deref() == Some("plain")),
        "{doc:?}"
    );
    // The same file whole is read by the Word reader, structure and all.
    let whole = read(&docx, "report.docx", Format::Docx);
    assert!(whole.blocks.iter().all(|b| b.layout.reader.is_none()));
}

#[test]
fn charts_read_as_tables_of_what_they_plot() {
    let dir = tempfile::tempdir().unwrap();
    let fodt = dir.path().join("charted.fodt");
    std::fs::write(&fodt, CHARTED.replace("{chart}", CHART_OBJECT)).unwrap();
    let Some(docx) = convert(dir.path(), &fodt, "docx:MS Word 2007 XML") else {
        return;
    };
    let fods = dir.path().join("charted_book.fods");
    std::fs::write(&fods, CHARTED_BOOK.replace("{chart}", CHART_OBJECT)).unwrap();
    let xlsx = convert(dir.path(), &fods, "xlsx:Calc MS Excel 2007 XML").unwrap();
    let expected = "Chart: Revenue by region\n\n| Category | Sales 2024 |\n| --- | --- |\n| North | 1200 |\n| South | 800 |";
    let report = read(&docx, "charted.docx", Format::Docx);
    let texts: Vec<&str> = report.blocks.iter().map(|b| b.text.as_str()).collect();
    let at = texts
        .iter()
        .position(|t| *t == expected)
        .unwrap_or_else(|| panic!("no chart table in {texts:#?}"));
    assert!(
        texts[..at]
            .iter()
            .any(|t| t.contains("Sales rose in the north"))
            && texts[at..].iter().any(|t| t.contains("End of report")),
        "the chart stands where it is anchored: {texts:#?}"
    );
    // Saved as ODT, the chart is an object of the package ("Object 1/content.xml"), read in
    // place: its title and data table (LibreOffice writes the categories' cells empty there).
    let odt = convert(dir.path(), &fodt, "odt:writer8").unwrap();
    let texts = block_texts(&odt, "charted.odt", Format::Odt);
    assert_eq!(
        texts,
        [
            "Sales rose in the north.",
            "Revenue by region",
            "|  | Sales 2024 |\n| --- | --- |\n|  | 1200 |\n|  | 800 |",
            "End of report."
        ]
    );
    let book = read(&xlsx, "charted_book.xlsx", Format::Xlsx);
    let chart = book
        .blocks
        .iter()
        .find(|b| b.kind == BlockKind::Table && b.text.starts_with("Chart: "))
        .unwrap_or_else(|| panic!("no chart in {}", book.text()));
    assert_eq!(chart.text, expected);
    assert_eq!(chart.layout.headings, ["Charts"]);
}

#[test]
fn comments_keep_their_anchor_and_author() {
    let dir = tempfile::tempdir().unwrap();
    let fods = dir.path().join("noted.fods");
    std::fs::write(&fods, NOTED_BOOK).unwrap();
    let Some(xlsx) = convert(dir.path(), &fods, "xlsx:Calc MS Excel 2007 XML") else {
        return;
    };
    let book = read(&xlsx, "noted.xlsx", Format::Xlsx);
    let note = book
        .blocks
        .iter()
        .find(|b| b.text.contains("supplier visit"))
        .unwrap_or_else(|| panic!("no note in {}", book.text()));
    assert_eq!(
        note.text,
        "Budget!B2 (Ana Silva): Quote from the March supplier visit"
    );
    assert_eq!(note.layout.headings, ["Comments"]);

    let fodp = dir.path().join("commented.fodp");
    std::fs::write(&fodp, COMMENTED_DECK).unwrap();
    let pptx = convert(dir.path(), &fodp, "pptx:Impress MS PowerPoint 2007 XML").unwrap();
    let deck = read(&pptx, "commented.pptx", Format::Pptx);
    let comment = deck
        .blocks
        .iter()
        .find(|b| b.text.contains("lens replacement"))
        .unwrap_or_else(|| panic!("no comment in {}", deck.text()));
    assert_eq!(
        comment.text,
        "Comment (Cy Okafor): Add the lens replacement cost"
    );
    assert_eq!(comment.layout.slide, Some(1));
}

#[test]
fn right_to_left_pdf_text_reads_in_logical_order() {
    let Some(pdf) = printed_pdf("rtl", RIGHT_TO_LEFT) else {
        return;
    };
    // Without MuPDF's `mutool` (make setup installs it), Poppler's word boxes read the lines
    // in order, letter by letter.
    std::env::set_var("ENGRAM_MUTOOL", "/nonexistent/mutool");
    let without = read(&pdf, "rtl.pdf", Format::Pdf).text();
    std::env::remove_var("ENGRAM_MUTOOL");
    for expected in [
        "مرحبا بكم في المكتبة",
        "שלום עולם, זהו מסמך בדיקה",
        "Mixed: the word كتاب means book.",
    ] {
        assert!(
            without.contains(expected),
            "{expected:?} missing from\n{without}"
        );
    }
    assert!(!without.contains("السلام"), "{without}");
    let text = read(&pdf, "rtl.pdf", Format::Pdf).text();
    for expected in [
        "مرحبا بكم في المكتبة",
        "שלום עולם, זהו מסמך בדיקה",
        "Mixed: the word كتاب means book.",
        // One glyph for lam and alef (Poppler's letters come out as alef, lam), read whole
        // from MuPDF's characters.
        "السلام عليكم، لا أعلم كلام العلاقة في الإسلام",
        // Each mark drawn before its letter, within its box.
        "كَتَبَ الوَلَدُ الدَّرْسَ",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from\n{text}");
    }
    assert!(
        !text.chars().any(|c| matches!(c as u32, 0x202A..=0x202E)),
        "{text:?}"
    );
}

/// A ruled table LibreOffice prints reads as a Markdown table in its place (Poppler's reading
/// order gives it column by column).
#[test]
fn a_pdf_table_reads_as_a_table() {
    let Some(doc) = printed("results", RESULTS) else {
        return;
    };
    let text = doc.text();
    let table = doc
        .blocks
        .iter()
        .find(|b| b.kind == engram_parse::BlockKind::Table)
        .unwrap_or_else(|| panic!("no table in\n{text}"));
    assert_eq!(
        table.text,
        "| Model | Precision | Recall | F1 |\n| --- | --- | --- | --- |\n\
         | BM25 | 0.612 | 0.704 | 0.655 |\n\
         | Dense retriever | 0.668 | 0.741 | 0.703 |\n\
         | Hybrid (convex) | 0.713 | 0.786 | 0.748 |"
    );
    let before = text.find("Table 2 compares").unwrap();
    let after = text.find("The hybrid retriever leads").unwrap();
    let at = text.find("| Model |").unwrap();
    assert!(before < at && at < after, "{text}");
}

/// Korean text keeps every word and its spacing (Hangul is written with spaces between words);
/// Chinese and Japanese text (written without) gets no space between characters and loses none.
#[test]
fn cjk_pdf_text_reads_whole() {
    let cases: [(&str, &str, &[&str]); 2] = [
        (
            "korean",
            KOREAN,
            &[
                "대한민국의 수도는 서울특별시이며, 인구는 약 천만 명이다.",
                "회의는 다음 주 화요일 오후 세 시에 본사 회의실에서 열립니다.",
            ],
        ),
        (
            "cjk",
            CHINESE_JAPANESE,
            &[
                "北京是中华人民共和国的首都，人口约两千万。",
                "会议将于下周二下午三点在总部会议室举行。",
                "東京は日本の首都であり、人口は約千四百万人です。",
                "会議は来週の火曜日午後三時に本社の会議室で開かれます。",
            ],
        ),
    ];
    for (name, document, expected) in cases {
        let Some(doc) = printed(name, document) else {
            return;
        };
        let text = doc.text();
        for expected in expected {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
    }
}

#[test]
fn spreadsheet_numbers_read_as_the_sheet_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let fods = dir.path().join("figures.fods");
    std::fs::write(&fods, FIGURES).unwrap();
    for (format, filter, name) in [
        (Format::Xlsx, "xlsx:Calc MS Excel 2007 XML", "figures.xlsx"),
        (Format::Xls, "xls:MS Excel 97", "figures.xls"),
    ] {
        let Some(book) = convert(dir.path(), &fods, filter) else {
            return;
        };
        let text = read(&book, name, format).text();
        for expected in [
            "| Growth | 12.5% |",
            "| Price | $1,234.50 |",
            "| Visitors | 1,234,567 |",
            "| Plain | 0.5 |",
        ] {
            assert!(
                text.contains(expected),
                "{name}: {expected:?} missing from\n{text}"
            );
        }
    }
}
